//! A plan as an interactive page people open in a browser: one self-contained HTML file
//! (no network, no server), the data embedded as JSON and drawn on canvases.
//!
//! ```text
//!  ┌ title · source · one row per plan: verdict, arena, arena/bound, saving ┐
//!  │ search box · theme · zoom buttons                                      │
//!  │ ┌ plan 1 ─────────────────┐ ┌ plan 2 ─────────────────┐               │  side by side,
//!  │ │ time × address map      │ │ time × address map      │               │  one time and
//!  │ │ (arena ──, bound - -)   │ │ violations in red       │               │  one address
//!  │ ├ live bytes over time ───┤ ├ live bytes over time ───┤               │  scale for all
//!  │ └─────────────────────────┘ └─────────────────────────┘               │
//!  │ live at the clicked step, largest first · the checker's violations    │
//!  └────────────────────────────────────────────────────────────────────────┘
//! ```
//!
//! The page ([`TEMPLATE`], `report.html` beside this file) reads its data from a
//! `<script type="application/json">` element. The data is columnar so that 10^5 buffers
//! stay a few megabytes: each distinct problem once (names, sizes, lifetimes, gaps, and
//! what [`Annotations`] add: producing operator, tensors held, step labels), each plan as
//! its offsets (or extents), its arena, its bound and the checker's verdict with up to
//! [`MAX_VIOLATIONS`] violations located in time and address. Every `<` in the JSON is
//! written `\u003c`, so no name can close the script element.
//!
//! Numbers are JavaScript doubles on the page: exact up to 2^53 bytes and steps; beyond
//! that the drawing and the labels are rounded (the data still says which buffer is where).

use serde::Serialize;

use crate::checker::{Report, Violation};
use crate::plan::Plan;
use crate::problem::Problem;

/// The page: HTML, CSS and the drawing code, with `/*MEMPLAN-DATA*/` where the data goes.
pub const TEMPLATE: &str = include_str!("report.html");

/// The most violations a plan embeds (each is drawn and listed); the count says how many
/// the checker found in all.
pub const MAX_VIOLATIONS: usize = 10_000;

/// The most buffers one page draws, all its problems together. 10^5 buffers make a page
/// of about 4.4 MB that Chromium opens and draws in about 0.3 s (`scripts/bench_report.py`);
/// 10^6 about 45 MB and a few seconds. Beyond that a page would take hundreds of
/// megabytes and minutes: [`html`] refuses it.
pub const MAX_BUFFERS: usize = 1_000_000;

/// Why a page was not made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HtmlError {
    #[error(
        "a report draws at most {limit} buffers and this one has {buffers}: a page of more \
         would take hundreds of megabytes and minutes to open; draw fewer plans, or plan a \
         part of the problem (memplan plan and check handle any size)"
    )]
    TooLarge { buffers: usize, limit: usize },
}

/// What a model adds to its problem's buffers: who produces each, which tensors it holds,
/// and what runs at each step.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Annotations {
    /// Per buffer (problem order): the operator producing it, e.g. `Conv conv1`, or empty
    /// for a graph input or an unknown producer.
    pub producers: Vec<String>,
    /// Per buffer: the tensors it holds when more than one (views and in-place results
    /// share their input's bytes), else empty.
    pub tensors: Vec<Vec<String>>,
    /// Per step: what runs there, e.g. `3: Relu relu1` (empty when not known).
    pub steps: Vec<String>,
}

/// One plan on the page.
#[derive(Clone, Copy, Debug)]
pub struct PlanView<'a> {
    /// Its heading, e.g. the planner spec (`best-of`) or the plan file.
    pub title: &'a str,
    /// The problem it plans.
    pub problem: &'a Problem,
    pub plan: &'a Plan,
    /// The checker's report on it.
    pub report: &'a Report,
    /// A lower bound on its problem's arena (max-live, or what search proved).
    pub lower_bound: u64,
    /// Planning time in seconds, when it was planned here.
    pub seconds: Option<f64>,
    /// Annotations of its problem's buffers (ignored unless one entry per buffer).
    pub annotations: Option<&'a Annotations>,
}

/// The whole page.
#[derive(Clone, Debug)]
pub struct Page<'a> {
    /// The heading, e.g. `memplan report: resnet50.onnx`.
    pub title: &'a str,
    /// Where the problem came from (a file name), shown under the title.
    pub source: &'a str,
    /// The plans, drawn side by side in this order; savings are against the first.
    pub plans: Vec<PlanView<'a>>,
}

#[derive(Serialize)]
struct Data<'a> {
    version: u32,
    title: &'a str,
    source: &'a str,
    problems: Vec<ProblemData<'a>>,
    plans: Vec<PlanData<'a>>,
}

#[derive(Serialize)]
struct ProblemData<'a> {
    /// Buffer names; `null` when every name is its index (a CSV of numbered buffers).
    names: Option<Vec<&'a str>>,
    size: Vec<u64>,
    start: Vec<u64>,
    end: Vec<u64>,
    /// `[buffer, start, end]` for every gap.
    gaps: Vec<[u64; 3]>,
    /// Per buffer alignment; `null` when every buffer has alignment 1.
    alignment: Option<Vec<u64>>,
    /// `[buffer, offset]` for every buffer with a fixed offset.
    fixed: Vec<[u64; 2]>,
    /// Distinct producer texts, and per buffer an index into them (-1: none).
    ops: Vec<&'a str>,
    producer: Option<Vec<i64>>,
    /// `[buffer, [tensor names]]` for buffers holding several tensors.
    tensors: Vec<(usize, &'a [String])>,
    steps: &'a [String],
}

#[derive(Serialize)]
struct PlanData<'a> {
    title: &'a str,
    problem: usize,
    offset: &'a [u64],
    /// `[buffer, [[offset, len], …]]` per buffer of a fragmented plan.
    extents: Option<Vec<Vec<[u64; 2]>>>,
    arena: Option<u64>,
    /// The arena the plan claims (a plan file's `arena_bytes`), when it claims one.
    claimed_arena: Option<u64>,
    bound: u64,
    seconds: Option<f64>,
    valid: bool,
    violation_count: usize,
    violations: Vec<ViolationData>,
}

#[derive(Serialize)]
struct ViolationData {
    kind: &'static str,
    text: String,
    /// The buffers involved (ids).
    buffers: Vec<u32>,
    /// The steps `[start, end)` and addresses `[start, end)` the two buffers share.
    steps: Option<[u64; 2]>,
    addresses: Option<[u64; 2]>,
}

fn violation_data(v: &Violation) -> ViolationData {
    let (buffers, steps, addresses) = match v {
        Violation::AddressOverflow { buffer, .. }
        | Violation::Misaligned { buffer, .. }
        | Violation::FixedOffsetMoved { buffer, .. }
        | Violation::ExtentsSum { buffer, .. }
        | Violation::FirstExtentNotAtOffset { buffer, .. } => (vec![buffer.0], None, None),
        Violation::ExtentsOverlap {
            buffer, addresses, ..
        } => (vec![buffer.0], None, Some([addresses.0, addresses.1])),
        Violation::Overlap {
            a,
            b,
            steps,
            addresses,
            ..
        } => (
            vec![a.0, b.0],
            Some([steps.start, steps.end]),
            Some([addresses.0, addresses.1]),
        ),
        Violation::ConflictShared {
            a, b, addresses, ..
        } => (vec![a.0, b.0], None, Some([addresses.0, addresses.1])),
        Violation::WrongLength { .. }
        | Violation::WrongExtentsLength { .. }
        | Violation::ArenaMismatch { .. } => (Vec::new(), None, None),
    };
    ViolationData {
        kind: v.kind(),
        text: v.to_string(),
        buffers,
        steps,
        addresses,
    }
}

fn problem_data<'a>(problem: &'a Problem, annotations: Option<&'a Annotations>) -> ProblemData<'a> {
    let buffers = problem.buffers();
    let numbered = buffers
        .iter()
        .enumerate()
        .all(|(i, b)| b.name.parse::<usize>() == Ok(i) && b.name == i.to_string());
    let annotations = annotations.filter(|a| {
        (a.producers.is_empty() || a.producers.len() == buffers.len())
            && (a.tensors.is_empty() || a.tensors.len() == buffers.len())
    });
    let mut ops: Vec<&str> = Vec::new();
    let mut producer = None;
    let mut tensors = Vec::new();
    let mut steps: &[String] = &[];
    if let Some(a) = annotations {
        if !a.producers.is_empty() {
            let mut index = std::collections::HashMap::new();
            producer = Some(
                a.producers
                    .iter()
                    .map(|p| {
                        if p.is_empty() {
                            return -1;
                        }
                        *index.entry(p.as_str()).or_insert_with(|| {
                            ops.push(p.as_str());
                            ops.len() as i64 - 1
                        })
                    })
                    .collect(),
            );
        }
        tensors = a
            .tensors
            .iter()
            .enumerate()
            .filter(|(_, t)| !t.is_empty())
            .map(|(i, t)| (i, t.as_slice()))
            .collect();
        steps = &a.steps;
    }
    ProblemData {
        names: (!numbered).then(|| buffers.iter().map(|b| b.name.as_str()).collect()),
        size: buffers.iter().map(|b| b.size).collect(),
        start: buffers.iter().map(|b| b.lifetime.start).collect(),
        end: buffers.iter().map(|b| b.lifetime.end).collect(),
        gaps: buffers
            .iter()
            .enumerate()
            .flat_map(|(i, b)| b.gaps.iter().map(move |g| [i as u64, g.start, g.end]))
            .collect(),
        alignment: buffers
            .iter()
            .any(|b| b.alignment > 1)
            .then(|| buffers.iter().map(|b| b.alignment).collect()),
        fixed: buffers
            .iter()
            .enumerate()
            .filter_map(|(i, b)| b.fixed_offset.map(|o| [i as u64, o]))
            .collect(),
        ops,
        producer,
        tensors,
        steps,
    }
}

/// The page as one self-contained HTML document, or an error when its problems hold more
/// than [`MAX_BUFFERS`] buffers together.
pub fn html(page: &Page<'_>) -> Result<String, HtmlError> {
    // Plans of one problem (the same buffers) share its table.
    let mut problems: Vec<(&Problem, Option<&Annotations>)> = Vec::new();
    let mut plans = Vec::with_capacity(page.plans.len());
    for view in &page.plans {
        let index = match problems.iter().position(|(p, _)| {
            std::ptr::eq(*p, view.problem) || p.buffers() == view.problem.buffers()
        }) {
            Some(i) => {
                if problems[i].1.is_none() {
                    problems[i].1 = view.annotations;
                }
                i
            }
            None => {
                problems.push((view.problem, view.annotations));
                problems.len() - 1
            }
        };
        let extents = view.plan.extents.as_ref().map(|lists| {
            lists
                .iter()
                .map(|l| l.iter().map(|e| [e.offset, e.len]).collect())
                .collect()
        });
        plans.push(PlanData {
            title: view.title,
            problem: index,
            offset: &view.plan.offsets,
            extents,
            arena: view
                .report
                .arena_bytes
                .or_else(|| view.plan.recomputed_arena(view.problem)),
            claimed_arena: view.plan.arena_bytes,
            bound: view.lower_bound,
            seconds: view.seconds,
            valid: view.report.is_valid(),
            violation_count: view.report.violations.len(),
            violations: view
                .report
                .violations
                .iter()
                .take(MAX_VIOLATIONS)
                .map(violation_data)
                .collect(),
        });
    }
    let buffers: usize = problems.iter().map(|(p, _)| p.len()).sum();
    if buffers > MAX_BUFFERS {
        return Err(HtmlError::TooLarge {
            buffers,
            limit: MAX_BUFFERS,
        });
    }
    let data = Data {
        version: 1,
        title: page.title,
        source: page.source,
        problems: problems
            .into_iter()
            .map(|(p, a)| problem_data(p, a))
            .collect(),
        plans,
    };
    // Strings, integers, floats and string slices always serialize (a NaN time would be
    // written as null).
    let json = serde_json::to_string(&data).expect("report data serializes");
    // `<` appears only inside strings: escaped, no name can end the script element.
    let json = json.replace('<', "\\u003c");
    let title = escape_html(page.title);
    Ok(TEMPLATE
        .replacen("<!--MEMPLAN-TITLE-->", &title, 1)
        .replacen("/*MEMPLAN-DATA*/", &json, 1))
}

/// `text` with `&`, `<`, `>`, `"` and `'` escaped for HTML.
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker;
    use crate::problem::Buffer;

    fn data_of(html: &str) -> serde_json::Value {
        let start = html.find("id=\"memplan-data\">").unwrap() + "id=\"memplan-data\">".len();
        let end = start + html[start..].find("</script>").unwrap();
        serde_json::from_str(&html[start..end]).unwrap()
    }

    #[test]
    fn names_cannot_close_the_script_element() {
        let problem = Problem::from_buffers(vec![
            Buffer::new("</script><script>alert(1)</script>", 4, 0, 2),
            Buffer::new("b", 4, 1, 3),
        ])
        .unwrap();
        let plan = Plan::new(&problem, vec![0, 4]).unwrap();
        let report = checker::check(&problem, &plan);
        let page = Page {
            title: "<b>t</b>",
            source: "x.csv",
            plans: vec![PlanView {
                title: "p",
                problem: &problem,
                plan: &plan,
                report: &report,
                lower_bound: 8,
                seconds: None,
                annotations: None,
            }],
        };
        let html = html(&page).unwrap();
        assert_eq!(
            html.matches("</script>").count(),
            TEMPLATE.matches("</script>").count()
        );
        assert!(html.contains("&lt;b&gt;t&lt;/b&gt;"));
        let data = data_of(&html);
        assert_eq!(
            data["problems"][0]["names"][0],
            "</script><script>alert(1)</script>"
        );
        assert_eq!(data["plans"][0]["valid"], true);
    }

    #[test]
    fn plans_of_one_problem_share_it_and_violations_are_located() {
        let problem =
            Problem::from_buffers(vec![Buffer::new("0", 4, 0, 2), Buffer::new("1", 4, 1, 3)])
                .unwrap();
        let good = Plan::new(&problem, vec![0, 4]).unwrap();
        let bad = Plan::new(&problem, vec![0, 2]).unwrap();
        let (r1, r2) = (
            checker::check(&problem, &good),
            checker::check(&problem, &bad),
        );
        let view = |title, plan, report| PlanView {
            title,
            problem: &problem,
            plan,
            report,
            lower_bound: 8,
            seconds: Some(0.5),
            annotations: None,
        };
        let page = Page {
            title: "t",
            source: "s",
            plans: vec![view("good", &good, &r1), view("bad", &bad, &r2)],
        };
        let data = data_of(&html(&page).unwrap());
        assert_eq!(data["problems"].as_array().unwrap().len(), 1);
        assert!(
            data["problems"][0]["names"].is_null(),
            "numbered names are left out"
        );
        assert_eq!(data["plans"][1]["problem"], 0);
        assert_eq!(data["plans"][1]["valid"], false);
        let v = &data["plans"][1]["violations"][0];
        assert_eq!(v["kind"], "overlap");
        assert_eq!(v["buffers"], serde_json::json!([0, 1]));
        assert_eq!(v["steps"], serde_json::json!([1, 2]));
        assert_eq!(v["addresses"], serde_json::json!([2, 4]));
    }

    #[test]
    fn a_page_beyond_the_limit_is_refused() {
        let problem = Problem::from_buffers(
            (0..MAX_BUFFERS + 1)
                .map(|i| Buffer::new(i.to_string(), 1, 0, 1))
                .collect(),
        )
        .unwrap();
        let plan = Plan::new(&problem, (0..problem.len() as u64).collect()).unwrap();
        let report = checker::Report {
            arena_bytes: Some(problem.len() as u64),
            violations: Vec::new(),
        };
        let page = Page {
            title: "t",
            source: "s",
            plans: vec![PlanView {
                title: "p",
                problem: &problem,
                plan: &plan,
                report: &report,
                lower_bound: 1,
                seconds: None,
                annotations: None,
            }],
        };
        let error = html(&page).unwrap_err();
        assert!(
            error.to_string().contains("at most 1000000 buffers"),
            "{error}"
        );
    }
}
