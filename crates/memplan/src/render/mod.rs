//! Pictures of a plan for people: an SVG ([`svg`]), a terminal map ([`ascii`]) and an
//! interactive page for a browser ([`html`]: zoom, search, hover, plans side by side).
//!
//! All three draw the same thing: time on x, address on y, one rectangle per live segment of
//! every buffer, with the arena and the max-live lower bound marked. A zero-size buffer
//! covers no address and draws no rectangle (the SVG keeps its hover title, the terminal
//! map its legend line).
//!
//! ```text
//!  address
//!    ▲ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ arena
//!    │        ┌──────┐
//!    │ ─ ─ ─ ─│─ ─ ─ │─ ─ ─ ─ ─ max-live bound
//!    │ ┌──────┤  c   ├────┐
//!    │ │  a   ├──────┤ d  │
//!    └─┴──────┴──────┴────┴──▶ time
//! ```
//!
//! Rendering never fails and never panics: a plan whose offsets do not match the problem
//! is drawn as far as it goes (missing offsets count as 0), and sizes beyond the arena are
//! clipped by the scale.

pub mod ascii;
pub mod html;
pub mod svg;

use std::borrow::Cow;

use crate::plan::Plan;
use crate::problem::Problem;

/// `text` with its control characters escaped as Rust does (`\n`, `\u{1b}`), so that a
/// name cannot move the cursor, clear the screen or break a table's lines.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Where [`pad`] puts the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// `text` padded with spaces to `width` characters. Unlike `format!("{:<w$}")`, which
/// panics for widths above 65,535, any width works.
pub fn pad(text: &str, width: usize, align: Align) -> String {
    let fill = width.saturating_sub(text.chars().count());
    let mut out = String::with_capacity(text.len() + fill);
    if align == Align::Right {
        out.push_str(&" ".repeat(fill));
    }
    out.push_str(text);
    if align == Align::Left {
        out.push_str(&" ".repeat(fill));
    }
    out
}

/// What a picture shows: a problem, a plan for it and what to call it.
#[derive(Clone, Copy, Debug)]
pub struct Scene<'a> {
    pub problem: &'a Problem,
    pub plan: &'a Plan,
    /// A heading, e.g. the planner and the file (escaped where needed).
    pub title: &'a str,
}

impl Scene<'_> {
    /// The offset of buffer `i` (0 when the plan lacks it).
    fn offset(&self, i: usize) -> u64 {
        self.plan.offsets.get(i).copied().unwrap_or(0)
    }

    /// The address ranges `[start, end)` of buffer `i` (of `size` bytes), saturating: one
    /// per extent in a fragmented plan, else `[offset, offset + size)`. A fragmented plan
    /// without a list for `i` draws nothing for it.
    fn pieces(&self, i: usize, size: u64) -> Vec<(u64, u64)> {
        match &self.plan.extents {
            Some(lists) => lists.get(i).map_or_else(Vec::new, |l| {
                l.iter()
                    .map(|e| (e.offset, e.offset.saturating_add(e.len)))
                    .collect()
            }),
            None => {
                let offset = self.offset(i);
                vec![(offset, offset.saturating_add(size))]
            }
        }
    }

    /// The end of the highest piece, saturating.
    fn arena(&self) -> u64 {
        self.problem
            .buffers()
            .iter()
            .enumerate()
            .flat_map(|(i, b)| self.pieces(i, b.size))
            .map(|(_, end)| end)
            .max()
            .unwrap_or(0)
    }

    /// First and last step drawn: `[min start, max end)`, at least one step wide.
    fn time_span(&self) -> (u64, u64) {
        let buffers = self.problem.buffers();
        let start = buffers.iter().map(|b| b.lifetime.start).min().unwrap_or(0);
        let end = buffers.iter().map(|b| b.lifetime.end).max().unwrap_or(1);
        (start, end.max(start.saturating_add(1)))
    }
}

/// Short byte counts for axes and labels: `512 B`, `1.5 KiB`, `3.07 GiB`.
pub fn short_bytes(n: u64) -> String {
    let Some((value, unit)) = binary_units(n) else {
        return format!("{n} B");
    };
    let digits = if value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else {
        2
    };
    let text = format!("{value:.digits$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        &text
    };
    format!("{text} {unit}")
}

/// `n` bytes as a value in the largest binary unit (KiB … EiB) that keeps it at least 1,
/// or `None` below 1 KiB.
pub fn binary_units(n: u64) -> Option<(f64, &'static str)> {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return None;
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    Some((value, UNITS[unit]))
}

/// About `count` round tick values in `[lo, hi]`: multiples of 1, 2 or 5 times a power of
/// ten, or (`binary`, for bytes) of a power of two; `lo` itself when it is a multiple.
pub fn ticks(lo: u64, hi: u64, count: u64, binary: bool) -> Vec<u64> {
    let span = hi.saturating_sub(lo).max(1);
    let raw = (span / count.max(1)).max(1);
    let step = if binary {
        raw.checked_next_power_of_two().unwrap_or(1 << 63)
    } else {
        let mut unit = 1u64;
        while unit.saturating_mul(10) <= raw {
            unit = unit.saturating_mul(10);
        }
        [1u64, 2, 5, 10]
            .iter()
            .map(|m| unit.saturating_mul(*m))
            .find(|&s| s >= raw)
            .unwrap_or(unit)
    };
    let mut out = Vec::new();
    let mut t = lo.div_ceil(step).saturating_mul(step);
    while t <= hi && out.len() < 64 {
        out.push(t);
        match t.checked_add(step) {
            Some(next) => t = next,
            None => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_bytes_are_short() {
        assert_eq!(short_bytes(512), "512 B");
        assert_eq!(short_bytes(1536), "1.5 KiB");
        assert_eq!(short_bytes(1 << 20), "1 MiB");
        assert_eq!(short_bytes(3_300_000_000), "3.07 GiB");
        assert_eq!(short_bytes(u64::MAX), "16 EiB");
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(ticks(0, 10, 5, false), vec![0, 2, 4, 6, 8, 10]);
        assert_eq!(ticks(3, 9, 3, false), vec![4, 6, 8]);
        assert_eq!(ticks(0, 4096, 4, true), vec![0, 1024, 2048, 3072, 4096]);
        assert_eq!(ticks(0, 1_310_720, 6, true)[1], 262_144);
        assert!(ticks(0, u64::MAX, 5, false).len() <= 64);
    }
}
