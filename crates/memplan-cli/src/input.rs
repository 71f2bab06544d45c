//! Reading problems, graphs and plans from files, with the file named in every error.
//!
//! Inputs dispatch on the file extension:
//!
//! ```text
//!   *.json ──► graph JSON ──┐
//!   *.onnx ──► ONNX ────────┴─► Graph ──► analyse (order, alias, in-place) ──► Problem
//!   *.tflite ► TFLite ──► TFLM's arena (16-byte sizes, scratch, RESHAPE/in-place) ──► Problem
//!   other  ──► minimalloc CSV ────────────────────────────────────────────────► Problem
//! ```

use std::path::Path;

use anyhow::{Context, Result};
use memplan::io::{csv, json};
use memplan::planner::Planner;
use memplan::{Plan, Problem};
use memplan_graph::{Analysis, Graph, Options, Order, Rules};
use memplan_onnx::ImportOptions;

/// How a model file becomes a problem: the `--input-shape` and `--dim` overrides for ONNX,
/// and the `--order`, `--no-alias` and `--no-inplace` flags for every graph.
#[derive(Clone, Debug, Default)]
pub struct GraphSettings {
    pub import: ImportOptions,
    pub order: Order,
    pub options: Options,
    /// `--exclusive-rules`: the switchable exclusivity rules of `--planner exclusive`.
    pub exclusive_rules: Rules,
    /// `--fragmented`: `--planner exclusive` may spread a block over several pieces.
    pub fragmented: bool,
    /// `exclusive:orders=all`: plan for every execution order the edges allow
    /// ([`memplan_graph::all_orders_problem`]) instead of the exclusivity rules.
    pub all_orders: bool,
}

/// What an input file gave: always a problem, and the graph with its analysis when the
/// file was a graph.
pub struct Loaded {
    pub problem: Problem,
    pub graph: Option<(Graph, Analysis)>,
    /// The model and its arena when the file was a `.tflite`.
    pub tflite: Option<TfliteInput>,
}

/// A `.tflite` model read for planning.
pub struct TfliteInput {
    /// The file's bytes, for writing it back with an offline plan.
    pub bytes: Vec<u8>,
    pub model: memplan_tflite::Model,
    pub arena: memplan_tflite::Arena,
}

/// What kind of file a path names, by its extension (case-insensitive).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// `.json`: memplan's graph JSON.
    GraphJson,
    /// `.onnx`: an ONNX model.
    Onnx,
    /// `.tflite`: a TensorFlow Lite model, planned as TFLite Micro plans it.
    Tflite,
    /// Anything else: a minimalloc CSV.
    MinimallocCsv,
}

impl FileKind {
    pub fn of(path: &Path) -> FileKind {
        let extension = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match extension.as_deref() {
            Some("json") => FileKind::GraphJson,
            Some("onnx") => FileKind::Onnx,
            Some("tflite") => FileKind::Tflite,
            _ => FileKind::MinimallocCsv,
        }
    }
}

/// Reads a whole file as UTF-8 text.
pub fn read_text(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read '{}'", path.display()))?;
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "'{}' is not UTF-8 text (invalid byte at position {}); memplan reads minimalloc CSV, graph JSON and plan JSON files",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

/// Reads a graph from a graph JSON (`.json`) or ONNX (`.onnx`) file.
pub fn read_graph(path: &Path, import: &ImportOptions) -> Result<Graph> {
    match FileKind::of(path) {
        FileKind::GraphJson => {
            let text = read_text(path)?;
            Ok(memplan_graph::read_graph_json(
                &text,
                &path.display().to_string(),
            )?)
        }
        FileKind::Onnx => Ok(memplan_onnx::import_file(path, import)?),
        FileKind::MinimallocCsv => anyhow::bail!(
            "'{}' is not a graph: give a graph JSON (.json) or ONNX (.onnx) file",
            path.display()
        ),
        FileKind::Tflite => anyhow::bail!(
            "'{}' is a TFLite model, which this command does not take: a .tflite works with plan, check, bound, inspect and bench; give a graph JSON (.json) or ONNX (.onnx) file here",
            path.display()
        ),
    }
}

/// How a `.tflite` becomes a problem: TFLM's arena, with RESHAPE outputs sharing their
/// input's bytes unless `--no-alias` and in-place elementwise operators unless
/// `--no-inplace`. `--order`, `--input-shape` and `--dim` do not apply (TFLM runs the
/// operators in file order, and shapes are static).
pub fn tflite_options(
    path: &Path,
    settings: &GraphSettings,
) -> Result<memplan_tflite::ArenaOptions> {
    if settings.order != Order::File {
        anyhow::bail!(
            "'{}': --order applies to graph JSON and ONNX; TFLite Micro runs a .tflite's operators in the file's order",
            path.display()
        );
    }
    if !settings.import.input_shapes.is_empty() || !settings.import.dims.is_empty() {
        anyhow::bail!(
            "'{}': --input-shape and --dim apply to ONNX; a .tflite has static shapes",
            path.display()
        );
    }
    Ok(memplan_tflite::ArenaOptions {
        sharing: memplan_tflite::Sharing {
            reshape: settings.options.alias,
            inplace: settings.options.inplace,
        },
        ..memplan_tflite::ArenaOptions::default()
    })
}

/// Reads a `.tflite` model and builds its arena problem.
pub fn read_tflite(path: &Path, options: memplan_tflite::ArenaOptions) -> Result<TfliteInput> {
    let bytes = memplan_tflite::model::read_bytes(path)?;
    let name = path.display().to_string();
    let model = memplan_tflite::read_model(&bytes, &name)?;
    let arena = memplan_tflite::arena(&model, options, &name)?;
    Ok(TfliteInput {
        bytes,
        model,
        arena,
    })
}

/// Analyses a graph read from `path`, naming the file in errors.
pub fn analyse(path: &Path, graph: &Graph, settings: &GraphSettings) -> Result<Analysis> {
    memplan_graph::analyse(graph, settings.order, settings.options)
        .with_context(|| format!("'{}'", path.display()))
}

/// Reads a problem: a minimalloc CSV directly, a graph through its analysis.
pub fn read_input(path: &Path, settings: &GraphSettings) -> Result<Loaded> {
    if FileKind::of(path) == FileKind::MinimallocCsv {
        let text = read_text(path)?;
        let problem = csv::read_problem(&text, &path.display().to_string())?;
        return Ok(Loaded {
            problem,
            graph: None,
            tflite: None,
        });
    }
    if FileKind::of(path) == FileKind::Tflite {
        let tflite = read_tflite(path, tflite_options(path, settings)?)?;
        return Ok(Loaded {
            problem: tflite.arena.problem.clone(),
            graph: None,
            tflite: Some(tflite),
        });
    }
    let graph = read_graph(path, &settings.import)?;
    let analysis = analyse(path, &graph, settings)?;
    Ok(Loaded {
        problem: analysis.problem.clone(),
        graph: Some((graph, analysis)),
        tflite: None,
    })
}

/// The problem the `exclusive` planner plans for a loaded graph (methods.md §1): its
/// buffers kept apart by exclusivity alone ([`memplan_graph::exclusive_problem`]), or,
/// with `all_orders`, by the all-orders rule ([`memplan_graph::all_orders_problem`]). A
/// minimalloc CSV has no graph, hence no operators to be exclusive: an error says so.
pub fn exclusive_problem(
    path: &Path,
    loaded: &Loaded,
    settings: &GraphSettings,
) -> Result<Problem> {
    let Some((graph, analysis)) = &loaded.graph else {
        anyhow::bail!(
            "'{}' is not a graph: the exclusive planner needs a graph JSON (.json) or ONNX (.onnx) file, because exclusivity comes from the operators and their edges",
            path.display()
        );
    };
    if settings.all_orders {
        return memplan_graph::all_orders_problem(graph, analysis)
            .with_context(|| format!("'{}'", path.display()));
    }
    memplan_graph::exclusive_problem(graph, analysis, settings.exclusive_rules)
        .with_context(|| format!("'{}'", path.display()))
}

/// Whether an exclusive plan file was made for every execution order: its
/// `exclusive_orders` is `"all"` (absent or `"one"`: the order it was made for).
pub fn exclusive_plan_all_orders(path: &Path, summary: &json::PlanSummary) -> Result<bool> {
    match summary.extra.get("exclusive_orders") {
        None => Ok(false),
        Some(serde_json::Value::String(s)) if s == "one" => Ok(false),
        Some(serde_json::Value::String(s)) if s == "all" => Ok(true),
        Some(other) => anyhow::bail!(
            "'{}': \"exclusive_orders\" is {other}; it must be \"one\" or \"all\"",
            path.display()
        ),
    }
}

/// The summary of a plan JSON (planner, alignment, the planner's own fields), or `None`
/// for a solution CSV.
pub fn read_plan_summary(path: &Path) -> Result<Option<json::PlanSummary>> {
    let text = read_text(path)?;
    if !text.trim_start().starts_with('{') {
        return Ok(None);
    }
    Ok(Some(json::read_plan_summary(
        &text,
        &path.display().to_string(),
    )?))
}

/// The exclusivity rules an exclusive plan file was made with, or `None` for the plan of
/// a lifetime problem. A plan JSON whose `planner` is `exclusive` records its rules in
/// `exclusive_rules`; `memplan check` rebuilds the same exclusive problem from them.
pub fn exclusive_plan_rules(path: &Path, summary: &json::PlanSummary) -> Result<Option<Rules>> {
    if summary.planner != memplan::planner::Exclusive::DEFAULT.name() {
        return Ok(None);
    }
    match summary.extra.get("exclusive_rules") {
        Some(serde_json::Value::String(rules)) => Rules::parse(rules)
            .map(Some)
            .map_err(|e| anyhow::anyhow!("'{}': \"exclusive_rules\": {e}", path.display())),
        _ => anyhow::bail!(
            "'{}' is an exclusive plan but does not record its \"exclusive_rules\" (a string such as \"edges,branches,outputs\"); add it, or plan again with `memplan plan --planner exclusive -f json`",
            path.display()
        ),
    }
}

/// Reads a plan for `problem`: plan JSON when the file starts with `{`, else a solution CSV.
pub fn read_plan(path: &Path, problem: &Problem) -> Result<Plan> {
    let text = read_text(path)?;
    let source = path.display().to_string();
    if text.trim_start().starts_with('{') {
        Ok(json::read_plan_json(&text, &source, problem)?)
    } else {
        Ok(csv::read_solution(&text, &source, problem)?)
    }
}
