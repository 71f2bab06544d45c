//! `memplan report` as a library: an input, the planners to run on it and plan files to
//! compare, to one self-contained HTML page ([`memplan::render::html`]).
//!
//! ```text
//!  INPUT ──► a plan JSON: its buffers are the problem, its offsets the first plan
//!        └─► anything else: read_input ──► stage / execute per --planner spec ──► plans
//!  --compare PLAN ──► read against the input's problem (plan JSON or solution CSV)
//!  every plan ──► the checker (its verdict and violations drawn on the page)
//!  the model ──► annotations: producing operator, tensors per buffer, step labels
//! ```
//!
//! Unlike `plan`, a plan that breaks the rules is not an error here: it is drawn, its
//! violations in red, and [`Built::valid`] says so (the CLI exits 1, as `check` does).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use memplan::checker::{self, Report};
use memplan::io::json;
use memplan::planner::search::Search;
use memplan::render::html::{self, Annotations, Page, PlanView};
use memplan::{Plan, Problem};

use crate::input::{self, FileKind, GraphSettings, Loaded};
use crate::plan::{self as session, Request};
use crate::run::Hooks;
use crate::spec::{Kind, PlannerSpec};

/// What to put on the page.
#[derive(Clone)]
pub struct ReportRequest {
    /// Planner specs to run on the input, in order (`best-of`, `search`, `tflm-greedy`,
    /// `exclusive:…`). Empty: the default planner ([`crate::spec::DEFAULT_PLANNER`]), and
    /// for a `.tflite` TFLite Micro's own planner (`tflm-greedy`) first; none for a plan
    /// JSON input, which is its own plan.
    pub planners: Vec<String>,
    /// Plan files to check and draw beside the planners' plans.
    pub compare: Vec<PathBuf>,
    pub settings: GraphSettings,
    /// search's options (its time limit counts per search run).
    pub search: Search,
    /// Every buffer's alignment raised to this (1: as the input says).
    pub alignment: u64,
}

/// One plan on the page, as the shells report it.
#[derive(Clone, Debug)]
pub struct PlanLine {
    pub title: String,
    pub arena: Option<u64>,
    pub lower_bound: u64,
    pub valid: bool,
    pub violations: usize,
    pub buffers: usize,
}

/// The page and what it shows.
pub struct Built {
    pub html: String,
    pub plans: Vec<PlanLine>,
}

impl Built {
    /// Whether every plan on the page passed the checker.
    pub fn valid(&self) -> bool {
        self.plans.iter().all(|p| p.valid)
    }
}

struct Entry {
    title: String,
    problem: usize,
    plan: Plan,
    report: Report,
    lower_bound: u64,
    seconds: Option<f64>,
}

/// Builds the report of `file`.
pub fn report_file(file: &Path, request: &ReportRequest, hooks: &Hooks) -> Result<Built> {
    let mut problems: Vec<Problem> = Vec::new();
    let mut entries: Vec<Entry> = Vec::new();
    let mut annotations = None;
    let source = file.display().to_string();

    let plan_json_input = FileKind::of(file) == FileKind::GraphJson && {
        let text = input::read_text(file)?;
        json::is_plan_json(&text)
    };
    if plan_json_input {
        if !request.planners.is_empty() {
            bail!(
                "'{source}' is a plan JSON, which is drawn as it is; --planner applies to a problem or a model: give the problem file (CSV, graph JSON, ONNX, TFLite) to plan it again"
            );
        }
        let text = input::read_text(file)?;
        let problem = json::read_problem_of_plan(&text, &source)?;
        let summary = json::read_plan_summary(&text, &source)?;
        let plan = json::read_plan_json(&text, &source, &problem)?;
        let lower_bound = session::max_live(&problem, file)?;
        let report = checker::check(&problem, &plan);
        let planner = if summary.planner.is_empty() {
            "plan".to_string()
        } else {
            summary.planner.clone()
        };
        problems.push(problem);
        entries.push(Entry {
            title: format!("{} ({planner})", file_name(file)),
            problem: 0,
            plan,
            report,
            lower_bound,
            seconds: None,
        });
    } else {
        let mut loaded = input::read_input(file, &request.settings)?;
        annotations = Some(annotate(&loaded));
        let original = loaded.problem.clone();
        let lifetime_bound = session::max_live(&original, file)?;
        problems.push(original.clone());
        let specs = if request.planners.is_empty() {
            let default = crate::spec::DEFAULT_PLANNER.to_string();
            if loaded.tflite.is_some() {
                vec!["tflm-greedy".to_string(), default]
            } else {
                vec![default]
            }
        } else {
            request.planners.clone()
        };
        for text in &specs {
            let spec = PlannerSpec::parse(text)?;
            let settings = spec.settings(&request.settings);
            let mut one = Request::new(spec.clone(), &settings)?;
            one.search = Search {
                time_limit: request.search.time_limit,
                ..request.search
            };
            one.alignment = request.alignment;
            if loaded.problem.is_empty() && !original.is_empty() {
                loaded.problem = original.clone();
            }
            let ready = Instant::now();
            let staged = session::stage(file, &mut loaded, &one)?;
            let executed = session::execute(&staged, &one, ready, hooks)
                .with_context(|| format!("'{source}'"))?;
            let report = checker::check(&staged.problem, &executed.output.plan);
            // An exclusive plan holds for the tensors' lifetimes too: drawn on them.
            let (problem, lower_bound) = if staged.kind == Kind::Exclusive
                || staged.problem.buffers() == original.buffers()
            {
                (0, lifetime_bound)
            } else {
                problems.push(staged.problem.clone());
                (problems.len() - 1, staged.lower_bound)
            };
            let report = if staged.kind == Kind::Exclusive {
                let mut combined = checker::check(&problems[0], &executed.output.plan);
                combined.violations.extend(report.violations);
                combined
            } else {
                report
            };
            let lower_bound = match &executed.output.stats {
                crate::run::Stats::Search(outcome) => lower_bound.max(outcome.lower_bound),
                _ => lower_bound,
            };
            entries.push(Entry {
                title: text.clone(),
                problem,
                plan: executed.output.plan,
                report,
                lower_bound,
                seconds: Some(executed.output.elapsed.as_secs_f64()),
            });
            loaded.problem = original.clone();
        }
    }
    let bound = entries.first().map_or(0, |e| e.lower_bound);
    compare_plans(&request.compare, &problems[0], bound, &mut entries)?;

    let title = format!("memplan report: {}", file_name(file));
    let page = Page {
        title: &title,
        source: &source,
        plans: entries
            .iter()
            .map(|e| PlanView {
                title: &e.title,
                problem: &problems[e.problem],
                plan: &e.plan,
                report: &e.report,
                lower_bound: e.lower_bound,
                seconds: e.seconds,
                annotations: if e.problem == 0 {
                    annotations.as_ref()
                } else {
                    None
                },
            })
            .collect(),
    };
    let html = html::html(&page).with_context(|| format!("'{source}'"))?;
    let plans = entries
        .iter()
        .map(|e| PlanLine {
            title: e.title.clone(),
            arena: e
                .report
                .arena_bytes
                .or_else(|| e.plan.recomputed_arena(&problems[e.problem])),
            lower_bound: e.lower_bound,
            valid: e.report.is_valid(),
            violations: e.report.violations.len(),
            buffers: problems[e.problem].len(),
        })
        .collect();
    Ok(Built { html, plans })
}

/// Reads each plan file against the input's problem and checks it.
fn compare_plans(
    files: &[PathBuf],
    problem: &Problem,
    lower_bound: u64,
    entries: &mut Vec<Entry>,
) -> Result<()> {
    for path in files {
        let text = input::read_text(path)?;
        let summary = input::plan_summary(path, &text)?;
        if let Some(summary) = &summary {
            if summary.planner == "npu" {
                bail!(
                    "'{}' is an npu plan, made for its platform's problem rather than the input's buffers; check it with `memplan check`",
                    path.display()
                );
            }
        }
        let alignment = summary.as_ref().map_or(1, |s| s.alignment.max(1));
        let (plan, aligned) = input::plan_from_text(path, &text, problem, alignment)?;
        let report = checker::check(aligned.as_ref().unwrap_or(problem), &plan);
        let planner = summary
            .as_ref()
            .map(|s| s.planner.clone())
            .filter(|p| !p.is_empty());
        entries.push(Entry {
            title: match planner {
                Some(p) => format!("{} ({p})", file_name(path)),
                None => file_name(path),
            },
            problem: 0,
            plan,
            report,
            lower_bound,
            seconds: None,
        });
    }
    Ok(())
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// What a model tells about its buffers: the operator producing each, the tensors each
/// holds, what runs at each step. A CSV tells nothing beyond the names.
pub fn annotate(loaded: &Loaded) -> Annotations {
    let n = loaded.problem.len();
    let mut out = Annotations::default();
    let mut tensors: Vec<Vec<String>> = vec![Vec::new(); n];
    for slot in &loaded.tensors {
        if let Some(list) = tensors.get_mut(slot.block.index()) {
            list.push(slot.name.clone());
        }
    }
    for list in &mut tensors {
        if list.len() < 2 {
            list.clear();
        }
    }
    out.tensors = tensors;
    if let Some((graph, analysis)) = &loaded.graph {
        let node_label = |id: memplan_graph::NodeId| {
            let node = graph.node(id);
            if node.name.is_empty() {
                node.op_type.clone()
            } else {
                format!("{} {}", node.op_type, node.name)
            }
        };
        out.producers = analysis
            .buffer_values
            .iter()
            .map(|values| {
                values
                    .first()
                    .and_then(|&v| graph.value(v).producer)
                    .map_or_else(String::new, |(node, _)| node_label(node))
            })
            .collect();
        out.steps = std::iter::once("graph inputs".to_string())
            .chain(analysis.order.iter().map(|&id| node_label(id)))
            .collect();
    } else if let Some(tflite) = &loaded.tflite {
        let model = &tflite.model;
        out.producers = tflite
            .arena
            .entries
            .iter()
            .map(|entry| match entry {
                memplan_tflite::arena::Entry::Tensors(list) => list
                    .first()
                    .and_then(|&(s, t)| {
                        let ops = &model.subgraphs.get(s)?.operators;
                        let k = ops.iter().position(|op| op.outputs.contains(&t))?;
                        Some(if s == 0 {
                            format!("{}@{k}", ops[k].kind())
                        } else {
                            format!("{}@{s}:{k}", ops[k].kind())
                        })
                    })
                    .unwrap_or_default(),
                memplan_tflite::arena::Entry::Scratch(request) => request.describe(model),
            })
            .collect();
    }
    out
}
