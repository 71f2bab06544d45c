//! Reading problems, graphs and plans from files, with the file named in every error.
//!
//! Inputs dispatch on the file extension:
//!
//! ```text
//!   *.json ──► graph JSON ──┐
//!   *.onnx ──► ONNX ────────┴─► Graph ──► analyse (order, alias, in-place) ──► Problem
//!   *.tflite ► TFLite ──► TFLM's arena (16-byte sizes, scratch, RESHAPE/in-place) ──► Problem
//!   other  ──► CSV: header with `op` and `tensor` ► memory-operation sequence ─► Problem
//!                   header with `op` (and `id`) ──► pool allocation trace ──────► Problem
//!                   any other header ──► minimalloc CSV ─────────────────────────► Problem
//! ```

use std::path::Path;

use anyhow::{Context, Result};
use memplan::io::{csv, json, memops};
use memplan::plan::tensors::TensorSlot;
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
    /// Where every tensor lives in the problem's buffers (one per buffer for CSV inputs).
    pub tensors: Vec<TensorSlot>,
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
    /// The kind of `path` by its extension; standard input (`-`) by its first bytes: `{`
    /// a graph JSON (or a plan JSON, where one is read), `TFL3` at byte 4 a TFLite model,
    /// UTF-8 text a CSV, anything else an ONNX model.
    pub fn of(path: &Path) -> FileKind {
        if memplan::io::file::is_stdin(path) {
            return match memplan::io::file::stdin_bytes() {
                Ok(bytes) => FileKind::sniff(bytes),
                // The reader that follows reports the error.
                Err(_) => FileKind::MinimallocCsv,
            };
        }
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

    /// The kind of an input from its first bytes (see [`FileKind::of`]).
    pub fn sniff(bytes: &[u8]) -> FileKind {
        let text = std::str::from_utf8(bytes)
            .ok()
            .filter(|t| !t.contains('\0'));
        let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
        if bytes.get(4..8) == Some(b"TFL3") {
            FileKind::Tflite
        } else if text.is_some() && matches!(first, Some(b'{') | Some(b'[')) {
            FileKind::GraphJson
        } else if text.is_some() || bytes.starts_with(b"\xEF\xBB\xBF") {
            FileKind::MinimallocCsv
        } else {
            FileKind::Onnx
        }
    }
}

/// Whether `path` names standard input (`-`).
pub fn is_stdin(path: &Path) -> bool {
    memplan::io::file::is_stdin(path)
}

/// Reads a whole file as UTF-8 text, at most [`memplan::io::file::MAX_TEXT_BYTES`].
pub fn read_text(path: &Path) -> Result<String> {
    Ok(memplan::io::file::read_text(path)?)
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
        FileKind::Onnx => {
            let graph = memplan_onnx::import_file(path, import)?;
            let bounded: Vec<_> = graph.bounded().collect();
            if !bounded.is_empty() {
                // A note, not an error: the plan is safe, and the sizes are upper bounds.
                eprintln!(
                    "note: '{}': {} tensors have data-dependent sizes and are planned at an upper bound (memplan inspect marks them), e.g. '{}': {}",
                    path.display(),
                    bounded.len(),
                    graph.value(bounded[0].0).name,
                    bounded[0].1
                );
            }
            Ok(graph)
        }
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
    if !settings.import.input_shapes.is_empty()
        || !settings.import.dims.is_empty()
        || settings.import.max_dim.is_some()
    {
        anyhow::bail!(
            "'{}': --input-shape, --dim and --max-dim apply to ONNX; a .tflite has static shapes",
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
///
/// With `all_orders` (`exclusive:orders=all`) the analysis writes a tensor in place only
/// where that holds in every execution order ([`memplan_graph::analyse_every_order`]).
pub fn analyse(path: &Path, graph: &Graph, settings: &GraphSettings) -> Result<Analysis> {
    let analysis = if settings.all_orders {
        memplan_graph::analyse_every_order(graph, settings.order, settings.options)
    } else {
        memplan_graph::analyse(graph, settings.order, settings.options)
    };
    analysis.with_context(|| format!("'{}'", path.display()))
}

/// The problem of a CSV: a memory-operation sequence (a header with `op` and `tensor`),
/// a pool allocation trace (`op` and `id`: read by `memplan_pool`, every event in file
/// order, ids named by their number), or a minimalloc CSV.
fn read_csv_problem(path: &Path) -> Result<Problem> {
    let text = read_text(path)?;
    let source = path.display().to_string();
    if !memops::looks_like_operations(&text) {
        return Ok(csv::read_problem(&text, &source)?);
    }
    if memops::has_tensor_column(&text) {
        return Ok(memops::read_problem(&text, &source)?);
    }
    let trace = memplan_pool::trace::Trace::from_csv(path, &text)?;
    let ops: Vec<memops::MemOp> = trace
        .events
        .iter()
        .enumerate()
        .map(|(k, event)| memops::MemOp {
            kind: match event.op {
                memplan_pool::trace::Op::Alloc => memops::OpKind::Alloc,
                memplan_pool::trace::Op::Free => memops::OpKind::Free,
            },
            tensor: event.id.to_string(),
            size: Some(event.size),
            alignment: Some(event.align),
            // The trace keeps no line numbers: the event's place, past the header.
            line: k + 2,
        })
        .collect();
    Ok(memops::problem_from_ops(&ops, &source)?)
}

/// True when `path` is a CSV of memory operations or a pool trace (its header, within
/// the first 64 KiB, has an `op` column); false for anything else, unreadable included
/// (the reader that follows names the problem).
pub fn is_operations_csv(path: &Path) -> bool {
    use std::io::Read;
    if FileKind::of(path) != FileKind::MinimallocCsv {
        return false;
    }
    let mut head = Vec::new();
    if memplan::io::file::is_stdin(path) {
        return memplan::io::file::stdin_bytes().is_ok_and(|bytes| {
            let head = &bytes[..bytes.len().min(64 * 1024)];
            memops::looks_like_operations(&String::from_utf8_lossy(head))
        });
    }
    let read = std::fs::File::open(path).and_then(|f| f.take(64 * 1024).read_to_end(&mut head));
    read.is_ok() && memops::looks_like_operations(&String::from_utf8_lossy(&head))
}

/// Reads a problem: a CSV directly, a graph through its analysis.
pub fn read_input(path: &Path, settings: &GraphSettings) -> Result<Loaded> {
    if FileKind::of(path) == FileKind::MinimallocCsv {
        let problem = read_csv_problem(path)?;
        return Ok(Loaded {
            tensors: TensorSlot::one_per_buffer(&problem),
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
            tensors: tflite.arena.tensor_slots(&tflite.model),
            tflite: Some(tflite),
        });
    }
    let graph = read_graph(path, &settings.import)?;
    let analysis = analyse(path, &graph, settings)?;
    Ok(Loaded {
        problem: analysis.problem.clone(),
        tensors: analysis.tensor_slots(&graph),
        graph: Some((graph, analysis)),
        tflite: None,
    })
}

/// The problem the `exclusive` planner plans for a loaded graph (the `exclusive` method): its
/// buffers kept apart by exclusivity alone ([`memplan_graph::exclusive_problem`]), or,
/// with `all_orders`, by the all-orders rule ([`memplan_graph::all_orders_problem`]). A
/// buffer list (minimalloc CSV, memory operations, trace) has no operators or edges, so
/// rules 1-3 have nothing to act on: the blocks are exclusive by rule 4 alone (live at
/// the same time), which is the list's own problem. The all-orders mode needs the edges:
/// an error says so.
pub fn exclusive_problem(
    path: &Path,
    loaded: &Loaded,
    settings: &GraphSettings,
) -> Result<Problem> {
    let Some((graph, analysis)) = &loaded.graph else {
        if settings.all_orders {
            anyhow::bail!(
                "'{}' is not a graph: exclusive:orders=all needs a graph JSON (.json) or ONNX (.onnx) file, because the execution orders come from the operators' edges",
                path.display()
            );
        }
        return Ok(loaded.problem.clone());
    };
    if settings.all_orders {
        // A graph loaded for one order (a bench over several specs) is analysed again.
        let every;
        let analysis = if analysis.every_order {
            analysis
        } else {
            every = self::analyse(path, graph, settings)?;
            &every
        };
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
    PlanFile::open(path)?.summary()
}

/// [`read_plan_summary`] of a plan file's text already read.
pub fn plan_summary(path: &Path, text: &str) -> Result<Option<json::PlanSummary>> {
    if !memplan::io::is_json(text) {
        return Ok(None);
    }
    Ok(Some(json::read_plan_summary(
        text,
        &path.display().to_string(),
    )?))
}

/// A plan file to read: a plan JSON is streamed (read twice, for its summary and for its
/// plan, never held whole: memplan's plan of 10^7 buffers is about 3 GB of text, up to
/// [`memplan::io::file::STREAMED_JSON_FACTOR`] times the text cap); a solution CSV is
/// read as text once, under the text cap.
pub enum PlanFile<'a> {
    Json(&'a Path),
    Csv(&'a Path, String),
}

impl<'a> PlanFile<'a> {
    /// Looks at the start of `path` to tell a plan JSON from a solution CSV.
    pub fn open(path: &'a Path) -> Result<Self> {
        if memplan::io::file::starts_as_json(path)? {
            Ok(PlanFile::Json(path))
        } else {
            Ok(PlanFile::Csv(path, read_text(path)?))
        }
    }

    /// The plan JSON's summary, `None` for a solution CSV.
    pub fn summary(&self) -> Result<Option<json::PlanSummary>> {
        match self {
            PlanFile::Json(path) => Ok(Some(json::read_plan_summary_from(
                memplan::io::file::open_json(path)?,
                &path.display().to_string(),
            )?)),
            PlanFile::Csv(..) => Ok(None),
        }
    }

    /// The plan for `problem`, as [`read_plan`] returns it.
    pub fn plan(&self, problem: &Problem, alignment: u64) -> Result<(Plan, Option<Problem>)> {
        match self {
            PlanFile::Json(path) => {
                let plan = json::read_plan_json_from(
                    memplan::io::file::open_json(path)?,
                    &path.display().to_string(),
                    problem,
                )?;
                realigned(path, plan, problem, alignment)
            }
            PlanFile::Csv(path, text) => plan_from_text(path, text, problem, alignment),
        }
    }
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

/// Reads a plan for `problem`: plan JSON when the file starts with `{` (or `[`, refused
/// as JSON), else a solution CSV.
///
/// Returns the plan and the problem to check it against: `problem` with every buffer's
/// alignment raised to what the plan records (a plan JSON's `alignment`, a solution
/// CSV's `alignment` column), so that a plan is held to the alignment it claims; `None`
/// when that is `problem` itself (no copy: on 10^7 buffers it doubled check's memory).
pub fn read_plan(
    path: &Path,
    problem: &Problem,
    alignment: u64,
) -> Result<(Plan, Option<Problem>)> {
    PlanFile::open(path)?.plan(problem, alignment)
}

/// `plan` with the problem to check it against: `problem` raised to the plan JSON's
/// `alignment`, `None` when that is `problem` itself.
fn realigned(
    path: &Path,
    plan: Plan,
    problem: &Problem,
    alignment: u64,
) -> Result<(Plan, Option<Problem>)> {
    if alignment <= 1 {
        return Ok((plan, None));
    }
    let aligned = problem
        .with_alignment(alignment)
        .with_context(|| format!("'{}': its \"alignment\" {alignment}", path.display()))?;
    Ok((plan, Some(aligned)))
}

/// [`read_plan`] of a plan file's text already read.
pub fn plan_from_text(
    path: &Path,
    text: &str,
    problem: &Problem,
    alignment: u64,
) -> Result<(Plan, Option<Problem>)> {
    let source = path.display().to_string();
    if memplan::io::is_json(text) {
        let plan = json::read_plan_json(text, &source, problem)?;
        realigned(path, plan, problem, alignment)
    } else {
        Ok(csv::read_solution_realigned(text, &source, problem)?)
    }
}
