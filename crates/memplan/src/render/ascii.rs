//! A plan as a time × address map for terminals, in plain ASCII.
//!
//! ```text
//!  address  (each row 1 KiB, each column 1/8 step)
//!    16 KiB +................ <- arena 16 KiB = max-live
//!           |ccccccccccccccc.
//!           |aaaaaaaabbbbbbbb
//!         0 +----------------> time
//!            0       1       2
//! ```
//!
//! Every cell shows the buffer whose rectangle holds the cell's centre (time and address),
//! as a symbol from [`SYMBOLS`] (repeating after 62 buffers), or `.` for free memory. A
//! buffer narrower or lower than a cell may not show: the map is a sample, the legend and
//! `--format json` are exact. A zero-size buffer covers no cell (it is in the legend only). The rows holding the arena and the max-live bound are marked
//! on the right. Up to [`LEGEND`] buffers, a legend lists each symbol's buffer.

use std::fmt::Write;

use super::{short_bytes, Scene};

/// The symbols of the buffers, in id order, repeating.
pub const SYMBOLS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
/// Up to this many buffers, the map is followed by a legend.
pub const LEGEND: usize = 62;
/// Columns of the map, at most.
pub const COLUMNS: usize = 64;
/// Rows of the map.
pub const ROWS: usize = 16;

/// The map of a scene, as lines of text. `bound` is the max-live lower bound, when known.
pub fn render(scene: &Scene<'_>, bound: Option<u64>) -> String {
    let buffers = scene.problem.buffers();
    let arena = scene.arena();
    let top = arena.max(bound.unwrap_or(0)).max(1);
    let (t0, t1) = scene.time_span();
    let span = t1 - t0;
    // Few steps: whole columns per step; many: a fraction of a step per column.
    let columns = if span <= COLUMNS as u64 {
        span as usize * (COLUMNS / span as usize)
    } else {
        COLUMNS
    };
    let rows = ROWS;
    let step_of = |c: usize| t0 as f64 + (c as f64 + 0.5) * span as f64 / columns as f64;
    let address_of = |r: usize| {
        (rows - 1 - r) as f64 * top as f64 / rows as f64 + top as f64 / rows as f64 / 2.0
    };

    let mut grid = vec![vec![b'.'; columns]; rows];
    for (i, b) in buffers.iter().enumerate() {
        let symbol = SYMBOLS[i % SYMBOLS.len()];
        let pieces = scene.pieces(i, b.size);
        b.for_each_live_segment(|s| {
            for (c, _) in (0..columns)
                .map(|c| (c, step_of(c)))
                .filter(|&(_, t)| s.start as f64 <= t && t < s.end as f64)
            {
                for (r, row) in grid.iter_mut().enumerate() {
                    let a = address_of(r);
                    if pieces
                        .iter()
                        .any(|&(lo, hi)| lo as f64 <= a && a < hi as f64)
                    {
                        row[c] = symbol;
                    }
                }
            }
        });
    }

    let label = |a: u64| short_bytes(a);
    let width = label(top).len().max(label(0).len());
    let mut out = String::new();
    let _ = writeln!(out, "{}", scene.title);
    let row_bytes = short_bytes(top.div_ceil(rows as u64));
    let steps_per_column = span as f64 / columns as f64;
    let column_text = if steps_per_column >= 1.0 {
        format!("{steps_per_column:.3}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
            + " step(s)"
    } else {
        format!("1/{} step", (1.0 / steps_per_column).round())
    };
    let _ = writeln!(
        out,
        "{:>width$}  address (each row ~{row_bytes}, each column {column_text})",
        ""
    );
    let row_of = |a: u64| {
        // The row whose band [k·top/rows, (k+1)·top/rows) holds the last byte below `a`.
        let k = ((a.saturating_sub(1)) as f64 / top as f64 * rows as f64) as usize;
        rows - 1 - k.min(rows - 1)
    };
    for (r, row) in grid.iter().enumerate() {
        let axis = if r == 0 { label(top) } else { String::new() };
        let mut marks = Vec::new();
        if row_of(arena) == r {
            marks.push(format!("arena {}", short_bytes(arena)));
        }
        if let Some(b) = bound {
            if row_of(b) == r {
                marks.push(format!("max-live {}", short_bytes(b)));
            }
        }
        let tail = if marks.is_empty() {
            String::new()
        } else {
            format!(" <- {}", marks.join(", "))
        };
        let _ = writeln!(
            out,
            "{axis:>width$} |{}{tail}",
            String::from_utf8_lossy(row)
        );
    }
    let _ = writeln!(out, "{:>width$} +{}> time", label(0), "-".repeat(columns));
    // Step numbers under the axis, at round steps, as many as fit without touching.
    let mut scale = vec![b' '; columns + 16];
    let mut free_from = 0;
    for t in super::ticks(t0, t1, (columns / 8) as u64, false) {
        let c = ((t - t0) as f64 / span as f64 * columns as f64).round() as usize;
        let text = t.to_string();
        if c >= free_from && c + text.len() <= scale.len() {
            scale[c..c + text.len()].copy_from_slice(text.as_bytes());
            free_from = c + text.len() + 2;
        }
    }
    let _ = writeln!(
        out,
        "{:>width$}  {}",
        "",
        String::from_utf8_lossy(&scale).trim_end()
    );
    if buffers.len() <= LEGEND {
        let names: Vec<_> = buffers.iter().map(|b| super::printable(&b.name)).collect();
        let name_w = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
        let size_w = buffers
            .iter()
            .map(|b| b.size.to_string().len())
            .max()
            .unwrap_or(0);
        let life_w = buffers
            .iter()
            .map(|b| b.lifetime.to_string().len())
            .max()
            .unwrap_or(0);
        for (i, b) in buffers.iter().enumerate() {
            let _ = writeln!(
                out,
                "  {}  {}  {:>size_w$} B  {:<life_w$}  offset {}",
                SYMBOLS[i] as char,
                super::pad(&names[i], name_w, super::Align::Left),
                b.size,
                b.lifetime.to_string(),
                placement(scene, i, b.size)
            );
        }
    } else {
        let _ = writeln!(
            out,
            "  ({} buffers; symbols repeat every {}; use --svg or --format json for every buffer)",
            buffers.len(),
            SYMBOLS.len()
        );
    }
    out
}

/// `offset` of a contiguous buffer, or its extents `[lo, hi) + [lo, hi) ...` when it
/// has several.
fn placement(scene: &Scene<'_>, i: usize, size: u64) -> String {
    let pieces = scene.pieces(i, size);
    if pieces.len() == 1 && scene.plan.extents.is_none() {
        return scene.offset(i).to_string();
    }
    let ranges: Vec<String> = pieces
        .iter()
        .map(|(lo, hi)| format!("[{lo}, {hi})"))
        .collect();
    format!("{} ({})", scene.offset(i), ranges.join(" + "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Plan;
    use crate::problem::{Buffer, Problem};

    #[test]
    fn two_stacked_buffers_fill_the_map() {
        let problem = Problem::from_buffers(vec![
            Buffer::new("low", 8, 0, 2),
            Buffer::new("high", 8, 0, 2),
        ])
        .unwrap();
        let plan = Plan::new(&problem, vec![0, 8]).unwrap();
        let text = render(
            &Scene {
                problem: &problem,
                plan: &plan,
                title: "two",
            },
            Some(16),
        );
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[2].ends_with("<- arena 16 B, max-live 16 B"), "{text}");
        assert!(lines[2].contains(&"b".repeat(64)), "{text}");
        assert!(lines[17].contains(&"a".repeat(64)), "{text}");
        assert!(text.contains("  a  low   8 B  [0, 2)  offset 0"), "{text}");
    }

    #[test]
    fn empty_problem_draws_an_empty_map() {
        let problem = Problem::default();
        let plan = Plan::new(&problem, vec![]).unwrap();
        let text = render(
            &Scene {
                problem: &problem,
                plan: &plan,
                title: "none",
            },
            Some(0),
        );
        assert!(text.contains("+----"));
    }

    #[test]
    fn every_extent_of_a_fragmented_plan_is_drawn_and_listed() {
        use crate::plan::Extent;
        let problem =
            Problem::from_buffers(vec![Buffer::new("a", 4, 0, 2), Buffer::new("b", 6, 1, 3)])
                .unwrap();
        let e = |offset, len| Extent { offset, len };
        let plan = Plan::fragmented(&problem, vec![vec![e(2, 4)], vec![e(0, 2), e(6, 4)]]).unwrap();
        let scene = Scene {
            problem: &problem,
            plan: &plan,
            title: "t",
        };
        let text = render(&scene, None);
        assert!(text.contains("offset 0 ([0, 2) + [6, 10))"), "{text}");
        let picture = crate::render::svg::render(&scene, None);
        assert!(picture.contains("offset 0 to 2, 6 to 10"), "{picture}");
        // One rectangle per extent (b has one live segment).
        let group = &picture[picture.find("<title>b:").unwrap()..];
        let group = &group[..group.find("</g>").unwrap()];
        assert_eq!(group.matches("<rect").count(), 2, "{group}");
    }
}
