//! Plain-text tables and number formatting for people.

use std::borrow::Cow;
use std::fmt::Write;
use std::time::Duration;

use memplan::render::{pad, printable, Align};

/// `1048576 B (1.00 MiB)`; below 1 KiB just `12 B`.
pub fn bytes(n: u64) -> String {
    match memplan::render::binary_units(n) {
        Some((value, unit)) => format!("{n} B ({value:.2} {unit})"),
        None => format!("{n} B"),
    }
}

/// `arena / bound` with three decimals; `-` when the bound is 0.
pub fn ratio(arena: u64, bound: u64) -> String {
    if bound == 0 {
        "-".to_string()
    } else {
        format!("{:.3}", arena as f64 / bound as f64)
    }
}

/// Milliseconds with three significant decimals.
pub fn millis(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

/// Left-aligned `key  value` lines with the keys padded to one width.
pub fn key_values(rows: &[(&str, String)]) -> String {
    let width = rows
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (key, value) in rows {
        let _ = writeln!(
            out,
            "{}  {}",
            pad(key, width, Align::Left),
            printable(value)
        );
    }
    out
}

/// A table with a header row; the first column left-aligned, the others right-aligned.
/// Control characters in cells are escaped; any cell width works.
pub fn columns(header: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<Cow<str>>> = rows
        .iter()
        .map(|row| row.iter().map(|c| printable(c)).collect())
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (i, (cell, &w)) in cells.zip(&widths).enumerate() {
            let align = if i == 0 { Align::Left } else { Align::Right };
            text.push_str("  ");
            text.push_str(&pad(cell, w, align));
        }
        let _ = writeln!(out, "{}", text.trim_end());
    };
    line(&mut header.iter().copied());
    for row in &rows {
        line(&mut row.iter().map(|c| c.as_ref()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_exact_and_human() {
        assert_eq!(bytes(12), "12 B");
        assert_eq!(bytes(1048576), "1048576 B (1.00 MiB)");
        assert_eq!(bytes(1536), "1536 B (1.50 KiB)");
    }

    #[test]
    fn ratio_handles_zero_bound() {
        assert_eq!(ratio(5, 0), "-");
        assert_eq!(ratio(3, 2), "1.500");
    }
}
