//! A plan as an SVG picture: the address map on top, the memory profile below.
//!
//! ```text
//!  ┌──────────────────── title ─────────────────────┐
//!  │ address                                         │
//!  │  ▲ - - - - - - - - - - - - - - - - - - arena    │  one rectangle per live segment,
//!  │  │   ┌────┐        ┌──┐                         │  hover for name, size, lifetime,
//!  │  │ - │- - │- - - - │- │- - - - - - - - bound    │  offset; labels only when few
//!  │  │ ┌─┴────┴─┐ ┌────┴──┴─┐                       │  buffers and room for them
//!  │  └─┴────────┴─┴─────────┴──▶ time               │
//!  │ live bytes                                      │  the live bytes per step (a
//!  │  ▲ - - - - - - - - - - - - - - - - - - arena    │  lower bound at every step)
//!  │  │    ┌─────┐    ┌───┐                          │  against the same two lines
//!  │  └────┘     └────┘   └──▶ time                  │
//!  └─────────────────────────────────────────────────┘
//! ```
//!
//! Written as text, no dependency. Names are XML-escaped. Beyond [`OUTLINED`] buffers the
//! rectangles lose their outlines and beyond [`LABELLED`] their labels, so thousands of
//! buffers read as a texture rather than as text soup; every rectangle keeps its hover
//! title. A zero-size buffer (or an empty extent) covers no address: its group keeps the
//! hover title but draws no rectangle.

use std::fmt::Write;

use super::{short_bytes, ticks, Scene};
use crate::bound::live_profile;

/// Up to this many buffers, rectangles get a thin outline.
pub const OUTLINED: usize = 400;
/// Up to this many buffers, rectangles wide and tall enough get their name written in.
pub const LABELLED: usize = 80;

const WIDTH: f64 = 1200.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 175.0;
const TOP: f64 = 50.0;
const MAP: f64 = 520.0;
const GAP: f64 = 60.0;
const PROFILE: f64 = 160.0;
const BOTTOM: f64 = 45.0;

/// `&`, `<`, `>`, `"` and `'` as entities; control characters (not allowed in XML 1.0) as
/// U+FFFD.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(' '),
            c if c.is_control() => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// A colour per buffer: hues spread by the golden angle, so neighbours differ.
fn colour(i: usize) -> String {
    let hue = (i as f64 * 137.507_764) % 360.0;
    let light = [62, 52, 72][i % 3];
    format!("hsl({hue:.1},62%,{light}%)")
}

/// The SVG text of a scene. `bound` is the max-live lower bound, when known.
pub fn render(scene: &Scene<'_>, bound: Option<u64>) -> String {
    let problem = scene.problem;
    let buffers = problem.buffers();
    let arena = scene.arena();
    let top_value = arena.max(bound.unwrap_or(0)).max(1);
    let (t0, t1) = scene.time_span();
    let plot_w = WIDTH - LEFT - RIGHT;
    let x = |t: u64| LEFT + (t.saturating_sub(t0)) as f64 / (t1 - t0) as f64 * plot_w;
    let height = TOP + MAP + GAP + PROFILE + BOTTOM;
    let map_y = |a: u64| TOP + MAP - a as f64 / top_value as f64 * MAP;
    let profile_top = TOP + MAP + GAP;
    let profile_y = |a: u64| profile_top + PROFILE - a as f64 / top_value as f64 * PROFILE;

    let mut out = String::with_capacity(256 + buffers.len() * 160);
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        out,
        r#"<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="white"/>"#
    );
    let heading = match bound {
        Some(b) if b > 0 => format!(
            "{} — {} buffers, arena {}, max-live bound {}, arena/bound {:.3}",
            scene.title,
            buffers.len(),
            short_bytes(arena),
            short_bytes(b),
            arena as f64 / b as f64
        ),
        _ => format!(
            "{} — {} buffers, arena {}",
            scene.title,
            buffers.len(),
            short_bytes(arena)
        ),
    };
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="24" font-size="15" font-weight="bold">{}</text>"#,
        escape(&heading)
    );

    // Panel frames and axes.
    for (top, h, name) in [(TOP, MAP, "address"), (profile_top, PROFILE, "live bytes")] {
        let _ = writeln!(
            out,
            r##"<rect x="{LEFT}" y="{top}" width="{plot_w}" height="{h}" fill="#f7f7f7" stroke="#999" stroke-width="0.5"/>"##
        );
        let _ = writeln!(
            out,
            r##"<text x="{}" y="{}" text-anchor="start" fill="#333">{name}</text>"##,
            LEFT - 80.0,
            top - 16.0
        );
    }
    let address_ticks = ticks(0, top_value, 6, true);
    for &a in &address_ticks {
        let y = map_y(a);
        let _ = writeln!(
            out,
            r##"<line x1="{}" y1="{y:.2}" x2="{LEFT}" y2="{y:.2}" stroke="#333" stroke-width="0.5"/><text x="{}" y="{:.2}" text-anchor="end" font-size="11">{}</text>"##,
            LEFT - 4.0,
            LEFT - 6.0,
            y + 4.0,
            short_bytes(a)
        );
    }
    for &a in ticks(0, top_value, 3, true).iter() {
        let y = profile_y(a);
        let _ = writeln!(
            out,
            r##"<line x1="{}" y1="{y:.2}" x2="{LEFT}" y2="{y:.2}" stroke="#333" stroke-width="0.5"/><text x="{}" y="{:.2}" text-anchor="end" font-size="11">{}</text>"##,
            LEFT - 4.0,
            LEFT - 6.0,
            y + 4.0,
            short_bytes(a)
        );
    }
    for t in ticks(t0, t1, 10, false) {
        let xt = x(t);
        for bottom in [TOP + MAP, profile_top + PROFILE] {
            let _ = writeln!(
                out,
                r##"<line x1="{xt:.2}" y1="{bottom}" x2="{xt:.2}" y2="{}" stroke="#333" stroke-width="0.5"/><text x="{xt:.2}" y="{}" text-anchor="middle" font-size="11">{t}</text>"##,
                bottom + 4.0,
                bottom + 16.0
            );
        }
    }
    let _ = writeln!(
        out,
        r##"<text x="{}" y="{}" text-anchor="middle" fill="#333">time (step)</text>"##,
        LEFT + plot_w / 2.0,
        profile_top + PROFILE + 36.0
    );

    // The buffers.
    let outlined = buffers.len() <= OUTLINED;
    let stroke = if outlined {
        r##" stroke="#222" stroke-width="0.6""##
    } else {
        ""
    };
    let _ = writeln!(out, r#"<g id="buffers"{stroke}>"#);
    let mut labels = String::new();
    for (i, b) in buffers.iter().enumerate() {
        let pieces = scene.pieces(i, b.size);
        let where_: Vec<String> = pieces
            .iter()
            .map(|(lo, hi)| format!("{lo} to {hi}"))
            .collect();
        let _ = writeln!(
            out,
            r#"<g fill="{}"><title>{}: {} B ({}), lifetime {}, offset {}</title>"#,
            colour(i),
            escape(&b.name),
            b.size,
            short_bytes(b.size),
            b.lifetime,
            where_.join(", ")
        );
        // The label goes on the first piece.
        let (mut y_top, mut y_bottom) = (0.0, 0.0);
        for (k, &(offset, end)) in pieces.iter().enumerate() {
            let (top_y, bottom_y) = (map_y(end.min(top_value)), map_y(offset.min(top_value)));
            if k == 0 {
                (y_top, y_bottom) = (top_y, bottom_y);
            }
            let h = bottom_y - top_y;
            if offset >= end {
                // Empty: nothing to draw.
                continue;
            }
            b.for_each_live_segment(|s| {
                let (x0, x1) = (x(s.start), x(s.end));
                let _ = writeln!(
                    out,
                    r#"<rect x="{x0:.2}" y="{top_y:.2}" width="{:.2}" height="{h:.2}"/>"#,
                    x1 - x0
                );
            });
        }
        let h = y_bottom - y_top;
        out.push_str("</g>\n");
        if buffers.len() <= LABELLED {
            let (x0, x1) = (x(b.lifetime.start), x(b.lifetime.end));
            let fits = (x1 - x0) >= 7.0 * b.name.chars().count() as f64 + 6.0 && h >= 14.0;
            if fits {
                let _ = writeln!(
                    labels,
                    r#"<text x="{:.2}" y="{:.2}" text-anchor="middle" font-size="11">{}</text>"#,
                    (x0 + x1) / 2.0,
                    (y_top + y_bottom) / 2.0 + 4.0,
                    escape(&b.name)
                );
            }
        }
    }
    out.push_str("</g>\n");
    if !labels.is_empty() {
        let _ = writeln!(out, r#"<g id="labels" pointer-events="none">"#);
        out.push_str(&labels);
        out.push_str("</g>\n");
    }

    // The live-bytes profile.
    if let Some(profile) = live_profile(problem) {
        let mut path = format!("M{:.2},{:.2}", x(t0), profile_y(0));
        for (k, &(t, live)) in profile.iter().enumerate() {
            let next = profile.get(k + 1).map_or(t1, |p| p.0);
            let _ = write!(
                path,
                " L{:.2},{:.2} L{:.2},{:.2}",
                x(t),
                profile_y(live),
                x(next),
                profile_y(live)
            );
        }
        let _ = write!(path, " L{:.2},{:.2} Z", x(t1), profile_y(0));
        let _ = writeln!(
            out,
            r##"<path id="profile" d="{path}" fill="#9ecae1" stroke="#3182bd" stroke-width="0.8"><title>bytes live at each step</title></path>"##
        );
    }

    // The arena and the bound, in both panels; one label when they coincide.
    let mut lines = vec![(arena, "#d62728", format!("arena {}", short_bytes(arena)))];
    match bound {
        Some(b) if b == arena => {
            lines[0].2 = format!("arena = max-live {}", short_bytes(b));
        }
        Some(b) => lines.push((b, "#2ca02c", format!("max-live {}", short_bytes(b)))),
        None => {}
    }
    let _ = writeln!(out, r#"<g id="marks">"#);
    for (value, colour, name) in &lines {
        for (y, arena_y) in [
            (map_y(*value), map_y(arena)),
            (profile_y(*value), profile_y(arena)),
        ] {
            let _ = writeln!(
                out,
                r#"<line x1="{LEFT}" y1="{y:.2}" x2="{:.2}" y2="{y:.2}" stroke="{colour}" stroke-width="1.5" stroke-dasharray="6 3"><title>{name}</title></line>"#,
                LEFT + plot_w
            );
            // The bound is never above the arena: its label goes at least a text line
            // below the arena's.
            let label_y = if *value == arena {
                y
            } else {
                y.max(arena_y + 13.0)
            };
            let _ = writeln!(
                out,
                r#"<text x="{:.2}" y="{:.2}" fill="{colour}" font-size="11">{}</text>"#,
                LEFT + plot_w + 4.0,
                label_y + 4.0,
                escape(name)
            );
        }
    }
    out.push_str("</g>\n</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Plan;
    use crate::problem::{Buffer, Problem};

    #[test]
    fn names_are_escaped() {
        assert_eq!(escape(r#"a<b>&"c'"#), "a&lt;b&gt;&amp;&quot;c&apos;");
        assert_eq!(escape("x\u{1}y\n"), "x\u{FFFD}y ");
    }

    #[test]
    fn one_group_per_buffer_and_a_rect_per_segment() {
        let mut gappy = Buffer::new("g<1>", 4, 0, 10);
        gappy.gaps = vec![crate::Lifetime { start: 3, end: 5 }];
        let problem = Problem::from_buffers(vec![gappy, Buffer::new("b", 4, 3, 5)]).unwrap();
        let plan = Plan::new(&problem, vec![0, 0]).unwrap();
        let svg = render(
            &Scene {
                problem: &problem,
                plan: &plan,
                title: "t",
            },
            Some(4),
        );
        assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<title>g&lt;1&gt;: 4 B").count(), 1);
        assert!(svg.contains("arena = max-live 4 B"));
        assert!(!svg.contains("g<1>"));
    }
}
