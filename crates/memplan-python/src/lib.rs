//! `memplan._memplan`: the native module of the `memplan` Python package.
//!
//! A thin binding: every function parses its Python arguments, calls the `memplan`
//! libraries, and converts the result; no planning logic lives here. Errors become
//! exceptions carrying the library's message: each library error type is mapped to one
//! exception class in [`error`] (`MemplanError` and its subclasses, the built-in
//! `OSError`s for files). Every argument is checked here, so that no panic crosses into
//! Python: numbers out of range raise `ValueError`/`OverflowError` naming the argument.
//! The GIL is released while planning and checking; a `search` waits in short slices so
//! that Ctrl-C interrupts it and returns the best plan found so far.

mod args;
mod error;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use memplan::io::{csv, json};
use memplan::planner::search::Search;
use memplan::planner::{self, Strip};
use memplan::render::html;
use memplan::{bound, checker, Buffer as CoreBuffer, Plan, Problem as CoreProblem};
use memplan_session::run::{run, verify, Algorithm, Bounds, Hooks};
use pyo3::prelude::*;

use error::{
    input, internal, os_error, value, FormatError, InputError, MemplanError, ModelError,
    PlanningError, Result,
};

/// Runs `work`, turning a panic (a bug: every argument was checked before) into
/// `MemplanError("internal error: …")` instead of letting it reach Python.
fn guarded<T>(work: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".to_string());
        Err(internal(format!("memplan panicked ({what})")))
    })
}

/// The most worker threads `plan(..., threads=N)` accepts.
const MAX_THREADS: usize = 1024;

/// One buffer: a name, a size in bytes, a half-open lifetime `[start, end)` in steps, an
/// alignment, and optionally a fixed offset every plan must keep.
#[pyclass(module = "memplan", frozen, get_all)]
#[derive(Clone)]
pub struct Buffer {
    pub name: String,
    pub size: u64,
    pub start: u64,
    pub end: u64,
    pub alignment: u64,
    pub offset: Option<u64>,
}

#[pymethods]
impl Buffer {
    #[new]
    #[pyo3(signature = (name, size, start, end, alignment = 1, offset = None))]
    fn new(
        name: String,
        #[pyo3(from_py_with = args::size)] size: u64,
        #[pyo3(from_py_with = args::start)] start: u64,
        #[pyo3(from_py_with = args::end)] end: u64,
        #[pyo3(from_py_with = args::alignment)] alignment: u64,
        #[pyo3(from_py_with = args::offset)] offset: Option<u64>,
    ) -> Buffer {
        Buffer {
            name,
            size,
            start,
            end,
            alignment,
            offset,
        }
    }

    fn __repr__(&self) -> String {
        let mut text = format!(
            "Buffer({:?}, size={}, start={}, end={}",
            self.name, self.size, self.start, self.end
        );
        if self.alignment != 1 {
            text.push_str(&format!(", alignment={}", self.alignment));
        }
        if let Some(offset) = self.offset {
            text.push_str(&format!(", offset={offset}"));
        }
        text + ")"
    }
}

impl Buffer {
    fn from_core(b: &CoreBuffer) -> Buffer {
        Buffer {
            name: b.name.clone(),
            size: b.size,
            start: b.lifetime.start,
            end: b.lifetime.end,
            alignment: b.alignment,
            offset: b.fixed_offset,
        }
    }

    fn to_core(&self) -> CoreBuffer {
        let mut b = CoreBuffer::new(self.name.clone(), self.size, self.start, self.end);
        b.alignment = self.alignment;
        b.fixed_offset = self.offset;
        b
    }
}

/// A planning problem: buffers with sizes and lifetimes. Validated when built: names
/// unique, `start < end`, alignments at least 1, fixed offsets aligned.
#[pyclass(module = "memplan", frozen)]
pub struct Problem {
    pub inner: CoreProblem,
}

#[pymethods]
impl Problem {
    /// `Problem(buffers)`: from `Buffer` objects.
    #[new]
    fn new(buffers: Vec<Buffer>) -> Result<Problem> {
        let inner = CoreProblem::from_buffers(buffers.iter().map(Buffer::to_core).collect())?;
        Ok(Problem { inner })
    }

    /// From parallel lists: `sizes[i]`, `starts[i]`, `ends[i]` (half-open), and optional
    /// `names` (default `"0"`, `"1"`, …), `alignments` and fixed `offsets` (`None` entries
    /// for free buffers).
    #[staticmethod]
    #[pyo3(signature = (sizes, starts, ends, names = None, alignments = None, offsets = None))]
    fn from_lists(
        #[pyo3(from_py_with = args::sizes)] sizes: Vec<u64>,
        #[pyo3(from_py_with = args::starts)] starts: Vec<u64>,
        #[pyo3(from_py_with = args::ends)] ends: Vec<u64>,
        names: Option<Vec<String>>,
        #[pyo3(from_py_with = args::alignments)] alignments: Option<Vec<u64>>,
        #[pyo3(from_py_with = args::offsets)] offsets: Option<Vec<Option<u64>>>,
    ) -> Result<Problem> {
        let n = sizes.len();
        let lengths = [
            ("starts", Some(starts.len())),
            ("ends", Some(ends.len())),
            ("names", names.as_ref().map(Vec::len)),
            ("alignments", alignments.as_ref().map(Vec::len)),
            ("offsets", offsets.as_ref().map(Vec::len)),
        ];
        for (what, len) in lengths {
            if let Some(len) = len.filter(|&len| len != n) {
                return Err(input(format!(
                    "{what} has {len} entries but sizes has {n}; every list needs one entry per buffer"
                )));
            }
        }
        let buffers = (0..n)
            .map(|i| {
                let mut b = CoreBuffer::new(
                    names
                        .as_ref()
                        .map_or_else(|| i.to_string(), |v| v[i].clone()),
                    sizes[i],
                    starts[i],
                    ends[i],
                );
                if let Some(a) = &alignments {
                    b.alignment = a[i];
                }
                if let Some(o) = &offsets {
                    b.fixed_offset = o[i];
                }
                b
            })
            .collect();
        Ok(Problem {
            inner: CoreProblem::from_buffers(buffers)?,
        })
    }

    /// Reads a minimalloc CSV (`id,lower,upper,size[,alignment,offset,…]`) from text;
    /// `source` names it in errors.
    #[staticmethod]
    #[pyo3(signature = (text, source = "<string>"))]
    fn from_csv(text: &str, source: &str) -> Result<Problem> {
        Ok(Problem {
            inner: csv::read_problem(text, source)?,
        })
    }

    /// The problem as a minimalloc CSV.
    fn to_csv(&self) -> String {
        csv::write_problem(&self.inner)
    }

    /// The buffers, in id order.
    #[getter]
    fn buffers(&self) -> Vec<Buffer> {
        self.inner.buffers().iter().map(Buffer::from_core).collect()
    }

    /// The buffer names, in id order.
    #[getter]
    fn names(&self) -> Vec<String> {
        self.inner
            .buffers()
            .iter()
            .map(|b| b.name.clone())
            .collect()
    }

    /// The max-live lower bound: the most bytes live at one step. No plan is smaller.
    fn lower_bound(&self) -> Result<u64> {
        bound::max_live(&self.inner).ok_or_else(|| input("the bytes live at one step exceed 2^64"))
    }

    /// The same problem with every offset required to be a multiple of `alignment`
    /// (at least 1; `ValueError` otherwise).
    fn with_alignment(
        &self,
        #[pyo3(from_py_with = args::alignment)] alignment: u64,
    ) -> Result<Problem> {
        Ok(Problem {
            inner: aligned_problem(&self.inner, alignment)?,
        })
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __repr__(&self) -> String {
        format!("<memplan.Problem with {} buffers>", self.inner.len())
    }
}

/// A plan: one offset per buffer of its problem, the arena, and how it was found.
#[pyclass(module = "memplan", frozen, get_all)]
pub struct PlanResult {
    /// Offsets in buffer id order.
    pub offsets: Vec<u64>,
    /// Bytes: the largest `offset + size`.
    pub arena: u64,
    /// The best lower bound known: the bound `search` proved when it ran (never below
    /// max-live), else the max-live bound. `ratio` is `arena / lower_bound`, so a plan
    /// proven optimal has ratio 1.
    pub lower_bound: u64,
    /// The max-live lower bound of the problem (what `memplan plan` reports as
    /// `lower_bound_bytes`).
    pub max_live: u64,
    /// The alignment the plan was made with (every buffer's alignment raised to it).
    pub alignment: u64,
    /// The planner that ran.
    pub planner: String,
    /// For `best-of`, the candidate kept.
    pub chosen: Option<String>,
    /// For `search`: whether no smaller arena exists; `None` for other planners.
    pub proven_optimal: Option<bool>,
    /// For `search`: why it stopped (`lower-bound`, `exhausted`, `time-limit`,
    /// `node-limit`, `interrupted`).
    pub stop: Option<String>,
    /// Seconds spent planning.
    pub seconds: f64,
    /// The buffer names, in id order (for `offset_of` and dict conversion).
    pub names: Vec<String>,
    /// The problem this plan was made for (as given, before `alignment` raised it).
    pub problem: Py<Problem>,
}

#[pymethods]
impl PlanResult {
    /// `arena / lower_bound` (1.0 is optimal).
    #[getter]
    fn ratio(&self) -> f64 {
        self.arena as f64 / self.lower_bound.max(1) as f64
    }

    /// The offset of the buffer named `name`.
    fn offset_of(&self, name: &str) -> Result<u64> {
        self.names
            .iter()
            .position(|n| n == name)
            .map(|i| self.offsets[i])
            .ok_or_else(|| input(format!("the plan has no buffer named {name:?}")))
    }

    /// `{name: offset}` for every buffer.
    fn as_dict(&self) -> BTreeMap<String, u64> {
        self.names
            .iter()
            .cloned()
            .zip(self.offsets.iter().copied())
            .collect()
    }

    /// The plan JSON memplan's CLI writes (`memplan plan -f json`) and `memplan check`
    /// reads.
    fn to_json(&self, problem: &Problem) -> Result<String> {
        self.same_problem(&problem.inner)?;
        let plan = core_plan(&problem.inner, &self.offsets)?;
        let mut extra = serde_json::Map::new();
        if let Some(p) = self.proven_optimal {
            extra.insert("proven_optimal".into(), serde_json::json!(p));
            extra.insert(
                "search_lower_bound".into(),
                serde_json::json!(self.lower_bound),
            );
        }
        if let Some(c) = &self.chosen {
            extra.insert("chosen_planner".into(), serde_json::json!(c));
        }
        let summary = json::PlanSummary {
            planner: self.planner.clone(),
            lower_bound_bytes: self.max_live,
            alignment: self.alignment,
            extra,
        };
        Ok(json::write_plan_json(&problem.inner, &plan, &summary, None))
    }

    /// The solution CSV (the problem's CSV with an `offset` column).
    fn to_csv(&self, problem: &Problem) -> Result<String> {
        self.same_problem(&problem.inner)?;
        let plan = core_plan(&problem.inner, &self.offsets)?;
        Ok(csv::write_solution(&problem.inner, &plan))
    }

    /// The plan as one self-contained HTML page (no network): a zoomable time x address
    /// map and the live bytes over time, hover details, search by name, the checker's
    /// verdict. `compare`: more plans of the same problem, drawn side by side on the same
    /// scales. `problem` defaults to the one the plan was made for.
    #[pyo3(signature = (problem = None, *, title = None, compare = None))]
    fn to_html(
        &self,
        py: Python<'_>,
        problem: Option<Py<Problem>>,
        title: Option<&str>,
        compare: Option<Vec<Py<PlanResult>>>,
    ) -> Result<String> {
        let problem = problem.unwrap_or_else(|| self.problem.clone_ref(py));
        let core = &problem.get().inner;
        let mut results: Vec<&PlanResult> = vec![self];
        let compare = compare.unwrap_or_default();
        results.extend(compare.iter().map(|r| r.get()));
        // Each plan is drawn on, and checked against, the problem it was made for: the
        // problem with every alignment raised to the plan's.
        let mut aligned = Vec::with_capacity(results.len());
        for result in &results {
            result.same_problem(core)?;
            aligned.push(
                (result.alignment > 1)
                    .then(|| core.with_alignment(result.alignment))
                    .transpose()?,
            );
        }
        let mut plans = Vec::with_capacity(results.len());
        for (result, aligned) in results.iter().zip(&aligned) {
            let problem = aligned.as_ref().unwrap_or(core);
            let plan = core_plan(problem, &result.offsets)?;
            let report = checker::check(problem, &plan);
            let name = match &result.chosen {
                Some(chosen) => format!("{} ({chosen})", result.planner),
                None => result.planner.clone(),
            };
            plans.push((
                name,
                problem,
                plan,
                report,
                result.lower_bound,
                result.seconds,
            ));
        }
        let source = format!("{} buffers, planned from Python", core.len());
        let page = html::Page {
            title: title.unwrap_or("memplan report"),
            source: &source,
            plans: plans
                .iter()
                .map(
                    |(name, problem, plan, report, bound, seconds)| html::PlanView {
                        title: name,
                        problem,
                        plan,
                        report,
                        lower_bound: *bound,
                        seconds: Some(*seconds),
                        annotations: None,
                    },
                )
                .collect(),
        };
        html::html(&page).map_err(|e| input(e.to_string()))
    }

    /// The page of `to_html()` in an `<iframe>`, for Jupyter and other notebooks.
    fn _repr_html_(&self, py: Python<'_>) -> Result<String> {
        let page = self.to_html(py, None, None, None)?;
        Ok(format!(
            "<iframe srcdoc=\"{}\" style=\"width:100%;height:860px;border:0\" sandbox=\"allow-scripts\"></iframe>",
            html::escape_html(&page)
        ))
    }

    fn __len__(&self) -> usize {
        self.offsets.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "<memplan.PlanResult planner={:?} arena={} lower_bound={} ratio={:.3}>",
            self.planner,
            self.arena,
            self.lower_bound,
            self.ratio()
        )
    }
}

impl PlanResult {
    /// An error unless `problem` is the problem this plan was made for (same buffer names
    /// in the same order): a plan of another problem of the same length is refused.
    fn same_problem(&self, problem: &CoreProblem) -> Result<()> {
        let names = problem.buffers().iter().map(|b| &b.name);
        if problem.len() == self.names.len() && names.eq(self.names.iter()) {
            return Ok(());
        }
        let first = problem
            .buffers()
            .iter()
            .zip(&self.names)
            .find(|(b, n)| &b.name != *n);
        Err(input(match first {
            Some((b, n)) => format!(
                "this plan was made for another problem: its buffer {n:?} is {:?} in the problem given",
                b.name
            ),
            None => format!(
                "this plan was made for another problem: it has {} buffers, the problem given {}",
                self.names.len(),
                problem.len()
            ),
        }))
    }
}

fn core_plan(problem: &CoreProblem, offsets: &[u64]) -> Result<Plan> {
    if offsets.len() != problem.len() {
        return Err(input(format!(
            "the plan has {} offsets but the problem has {} buffers",
            offsets.len(),
            problem.len()
        )));
    }
    Plan::new(problem, offsets.to_vec())
        .ok_or_else(|| input("an offset plus its buffer's size exceeds 2^64"))
}

/// One way a plan breaks its problem.
#[pyclass(module = "memplan", frozen, get_all)]
pub struct Violation {
    /// `overlap`, `conflict`, `misaligned`, `fixed-offset-moved`, `overflow`,
    /// `wrong-length`, `arena-mismatch`, …
    pub kind: String,
    /// The checker's sentence.
    pub message: String,
    /// The names of the buffers involved.
    pub buffers: Vec<String>,
}

#[pymethods]
impl Violation {
    fn __repr__(&self) -> String {
        format!("<memplan.Violation {}: {}>", self.kind, self.message)
    }

    fn __str__(&self) -> String {
        self.message.clone()
    }
}

fn violation(v: &checker::Violation) -> Violation {
    Violation {
        kind: v.kind().to_string(),
        message: v.to_string(),
        buffers: v.buffers().into_iter().map(str::to_string).collect(),
    }
}

/// Runs `work` with the GIL released, waking every 50 ms to let Python handle signals;
/// on KeyboardInterrupt (or any signal handler's exception) it sets `cancel` and waits
/// for `work` to return, then re-raises.
fn run_interruptible<T: Send>(
    py: Python<'_>,
    cancel: &AtomicBool,
    work: impl FnOnce() -> T + Send,
) -> PyResult<T> {
    let mut pending: Option<PyErr> = None;
    let result = std::thread::scope(|scope| {
        let handle = scope.spawn(work);
        while !handle.is_finished() {
            py.detach(|| std::thread::sleep(Duration::from_millis(50)));
            if pending.is_none() {
                if let Err(e) = py.check_signals() {
                    cancel.store(true, Ordering::Relaxed);
                    pending = Some(e);
                }
            }
        }
        py.detach(|| handle.join())
    });
    let value = result.map_err(|_| internal("the planner panicked"))?;
    match pending {
        Some(e) => Err(e),
        None => Ok(value),
    }
}

/// Plans `problem` with `planner` (`best-of`, `search`, `strip`, any name of
/// `memplan.planners()`); by default `search` for at most one second (it starts from
/// best-of's plan and stops once it proves the arena optimal), as `memplan plan` without
/// `--planner`. `time_limit` (seconds), `seed` and `threads` are `search`'s;
/// `metric`, `max_iters` and `max_reads` are `strip`'s; `alignment` raises every buffer's
/// alignment. Every plan is checked before it is returned.
#[pyfunction]
#[pyo3(signature = (problem, planner = None, *, time_limit = None, alignment = 1, seed = 0, threads = 0, metric = None, max_iters = None, max_reads = None, return_on_interrupt = true))]
#[allow(clippy::too_many_arguments)]
fn plan(
    py: Python<'_>,
    problem: Py<Problem>,
    planner: Option<&str>,
    time_limit: Option<f64>,
    #[pyo3(from_py_with = args::alignment)] alignment: u64,
    #[pyo3(from_py_with = args::seed)] seed: u64,
    #[pyo3(from_py_with = args::threads)] threads: usize,
    metric: Option<&str>,
    #[pyo3(from_py_with = args::max_iters)] max_iters: Option<u32>,
    #[pyo3(from_py_with = args::max_reads)] max_reads: Option<u64>,
    return_on_interrupt: bool,
) -> Result<PlanResult> {
    let given = problem.clone_ref(py);
    let problem = problem.get();
    // No planner named: the default planner within its small budget (as the CLI).
    let defaulted = planner.is_none();
    let planner = planner.unwrap_or(memplan_session::spec::DEFAULT_PLANNER);
    let base = planner::by_name(planner)?;
    let kind = memplan_session::spec::Kind::of(base);
    let is_search = kind == memplan_session::spec::Kind::Search;
    let is_strip = kind == memplan_session::spec::Kind::Strip;
    check_search_args(is_search, planner, time_limit, seed, threads)?;
    if !is_strip && (metric.is_some() || max_iters.is_some() || max_reads.is_some()) {
        return Err(input(format!(
            "metric, max_iters and max_reads apply to planner='strip', not to '{planner}'"
        )));
    }
    let aligned = if alignment != 1 {
        Some(aligned_problem(&problem.inner, alignment)?)
    } else {
        None
    };
    let core = aligned.as_ref().unwrap_or(&problem.inner);
    let algorithm = if is_search {
        let mut options = Search {
            seed,
            threads,
            ..Search::DEFAULT
        };
        if let Some(t) = time_limit {
            options.time_limit = seconds_arg("time_limit", t)?;
        } else if defaulted {
            options.time_limit = memplan_session::spec::DEFAULT_TIME_LIMIT;
        }
        Algorithm::Search(options)
    } else if is_strip {
        Algorithm::Strip(Strip {
            metric: match metric {
                Some(m) => Some(m.parse::<planner::Metric>()?),
                None => Strip::DEFAULT.metric,
            },
            max_iters: max_iters.unwrap_or(Strip::DEFAULT.max_iters),
            max_reads: max_reads.unwrap_or(Strip::DEFAULT.max_reads),
            ..Strip::DEFAULT
        })
    } else if kind == memplan_session::spec::Kind::BestOf {
        Algorithm::BestOf
    } else {
        Algorithm::Planner(base)
    };
    let cancel = AtomicBool::new(false);
    let hooks = Hooks {
        progress: None,
        cancel: Some(&cancel),
    };
    let outcome = if is_search && return_on_interrupt {
        // Ctrl-C ends the search; its best plan is returned, `stop == "interrupted"`.
        let mut found = None;
        let result = run_interruptible(py, &cancel, || {
            found = Some(run(core, &algorithm, &hooks));
        });
        if let Err(e) = result {
            if !cancel.load(Ordering::Relaxed) {
                return Err(e.into());
            }
        }
        found.ok_or_else(|| internal("the search returned nothing"))?
    } else if is_search {
        // Ctrl-C still stops the search (and is raised): the flag is set from the
        // signal check, the best plan so far is dropped.
        run_interruptible(py, &cancel, || run(core, &algorithm, &hooks))?
    } else {
        py.detach(|| guarded(|| Ok(run(core, &algorithm, &hooks))))?
    };
    let output = outcome?;
    let bounds = Bounds::of(core, Some(&output))
        .ok_or_else(|| input("the bytes live at one step exceed 2^64"))?;
    py.detach(|| guarded(|| Ok(verify(core, &output.plan, base.name())?)))?;
    let search = output
        .search()
        .map(|s| (s.proven_optimal, s.stop.as_str().to_string()));
    Ok(PlanResult {
        arena: output.plan.arena_bytes.unwrap_or(0),
        chosen: output.chosen().map(str::to_string),
        offsets: output.plan.offsets,
        lower_bound: bounds.best(),
        max_live: bounds.max_live,
        alignment,
        planner: base.name().to_string(),
        proven_optimal: search.as_ref().map(|s| s.0),
        stop: search.map(|s| s.1),
        seconds: output.elapsed.as_secs_f64(),
        names: core.buffers().iter().map(|b| b.name.clone()).collect(),
        problem: given,
    })
}

/// Plans a file as `memplan plan FILE --planner SPEC` does, through the same library:
/// any input memplan reads (minimalloc CSV, memory-operation CSV, pool trace, graph JSON,
/// ONNX, `.tflite`) and any planner spec, graph planners included (`exclusive`,
/// `exclusive:orders=all`, `npu`, `npu:match=size`, `strip:placement=stacked`, ...).
/// Returns `(problem, result)`: the problem the spec planned (for `exclusive`, its blocks
/// with the exclusivity as conflict pairs; for `npu`, the platform's analysis), which
/// `check(problem, result)` accepts, and the checked plan, its `max_live` the bound the
/// CLI reports for the file. The default planner is the CLI's (`search` for at most one
/// second). `time_limit`, `seed` and `threads` are `search`'s; `input_shapes` and `dims`
/// ONNX's; `alias` and `inplace` switch the graph analysis'
/// sharing.
#[pyfunction]
#[pyo3(signature = (path, planner = None, *, alignment = 1, time_limit = None, seed = 0, threads = 0, input_shapes = None, dims = None, alias = true, inplace = true))]
#[allow(clippy::too_many_arguments)]
fn plan_file(
    py: Python<'_>,
    path: PathBuf,
    planner: Option<&str>,
    #[pyo3(from_py_with = args::alignment)] alignment: u64,
    time_limit: Option<f64>,
    #[pyo3(from_py_with = args::seed)] seed: u64,
    #[pyo3(from_py_with = args::threads)] threads: usize,
    #[pyo3(from_py_with = args::input_shapes)] input_shapes: Option<BTreeMap<String, Vec<u64>>>,
    #[pyo3(from_py_with = args::dims)] dims: Option<BTreeMap<String, u64>>,
    alias: bool,
    inplace: bool,
) -> Result<(Py<Problem>, PlanResult)> {
    use memplan_session::spec::{Kind, PlannerSpec};
    let defaulted = planner.is_none();
    let planner = planner.unwrap_or(memplan_session::spec::DEFAULT_PLANNER);
    let spec = PlannerSpec::parse(planner).map_err(|e| input(format!("{e:#}")))?;
    let is_search = spec.kind() == Kind::Search;
    check_search_args(is_search, planner, time_limit, seed, threads)?;
    check_alignment(alignment)?;
    let settings = memplan_session::input::GraphSettings {
        import: memplan_onnx::ImportOptions {
            input_shapes: input_shapes.unwrap_or_default(),
            dims: dims.unwrap_or_default(),
            max_dim: None,
        },
        options: memplan_graph::Options { alias, inplace },
        ..Default::default()
    };
    let mut request =
        memplan_session::plan::Request::new(spec, &settings).map_err(error::session)?;
    request.alignment = alignment;
    request.search = Search {
        seed,
        threads,
        time_limit: match time_limit {
            Some(t) => seconds_arg("time_limit", t)?,
            None if defaulted => memplan_session::spec::DEFAULT_TIME_LIMIT,
            None => Search::DEFAULT.time_limit,
        },
        ..Search::DEFAULT
    };
    let cancel = AtomicBool::new(false);
    let hooks = Hooks {
        progress: None,
        cancel: Some(&cancel),
    };
    let work = || {
        guarded(|| {
            memplan_session::plan::plan_file(&path, &request, &hooks).map_err(error::session)
        })
    };
    let planned = if is_search {
        // Ctrl-C stops the search and is raised.
        run_interruptible(py, &cancel, work)??
    } else {
        py.detach(work)?
    };
    let staged = planned.staged;
    let output = planned.executed.output;
    let bounds = Bounds::with_max_live(staged.lower_bound, Some(&output));
    let search = output
        .search()
        .map(|s| (s.proven_optimal, s.stop.as_str().to_string()));
    let names = staged
        .problem
        .buffers()
        .iter()
        .map(|b| b.name.clone())
        .collect();
    let problem = Py::new(
        py,
        Problem {
            inner: staged.problem,
        },
    )?;
    let result = PlanResult {
        arena: output.plan.arena_bytes.unwrap_or(0),
        chosen: output.chosen().map(str::to_string),
        offsets: output.plan.offsets,
        lower_bound: bounds.best(),
        max_live: bounds.max_live,
        alignment,
        planner: request.spec.planner(&request.settings).name().to_string(),
        proven_optimal: search.as_ref().map(|s| s.0),
        stop: search.map(|s| s.1),
        seconds: output.elapsed.as_secs_f64(),
        names,
        problem: problem.clone_ref(py),
    };
    Ok((problem, result))
}

/// A duration argument in seconds: finite and not negative (up to a year), else a
/// `ValueError` naming the argument.
fn seconds_arg(name: &str, seconds: f64) -> Result<Duration> {
    const MOST: f64 = 365.0 * 24.0 * 3600.0;
    if !seconds.is_finite() || !(0.0..=MOST).contains(&seconds) {
        return Err(value(format!(
            "{name} must be a number of seconds from 0 to {MOST} (a year), not {seconds}"
        )));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// `problem` with every buffer's alignment raised to `alignment`: a `ValueError` naming
/// the argument when it is 0, an `InputError` when a fixed offset is then misaligned.
fn aligned_problem(problem: &CoreProblem, alignment: u64) -> Result<CoreProblem> {
    check_alignment(alignment)?;
    Ok(problem.with_alignment(alignment)?)
}

/// A `ValueError` naming `alignment` when it is 0.
fn check_alignment(alignment: u64) -> Result<()> {
    if alignment == 0 {
        return Err(value(
            "alignment must be at least 1 (1: no alignment), not 0",
        ));
    }
    Ok(())
}

/// `time_limit`, `seed` and `threads` are search's: an `InputError` when given to another
/// planner, a `ValueError` for more threads than [`MAX_THREADS`].
fn check_search_args(
    is_search: bool,
    planner: &str,
    time_limit: Option<f64>,
    seed: u64,
    threads: usize,
) -> Result<()> {
    if !is_search && (time_limit.is_some() || seed != 0 || threads != 0) {
        return Err(input(format!(
            "time_limit, seed and threads apply to planner='search', not to '{planner}'"
        )));
    }
    if threads > MAX_THREADS {
        return Err(value(format!(
            "threads must be from 0 (every core) to {MAX_THREADS}, not {threads}"
        )));
    }
    Ok(())
}

/// Every violation of a plan (a `PlanResult`, or offsets in buffer id order): buffers
/// live at one step that share bytes, conflict pairs sharing bytes, misaligned offsets,
/// moved fixed offsets. An empty list means the plan is valid.
#[pyfunction]
fn check(py: Python<'_>, problem: &Problem, plan: &Bound<'_, PyAny>) -> Result<Vec<Violation>> {
    let (offsets, alignment): (Vec<u64>, u64) = match plan.cast::<PlanResult>() {
        Ok(result) => {
            let result = result.get();
            result.same_problem(&problem.inner)?;
            (result.offsets.clone(), result.alignment)
        }
        Err(_) => (args::plan_offsets(plan)?, 1),
    };
    // A plan is held to the alignment it was made with.
    let aligned = if alignment != 1 {
        Some(aligned_problem(&problem.inner, alignment)?)
    } else {
        None
    };
    let core = aligned.as_ref().unwrap_or(&problem.inner);
    if offsets.len() != core.len() {
        return Ok(vec![Violation {
            kind: "wrong-length".into(),
            message: format!(
                "the plan has {} offsets but the problem has {} buffers",
                offsets.len(),
                core.len()
            ),
            buffers: vec![],
        }]);
    }
    let Some(plan) = Plan::new(core, offsets) else {
        return Ok(vec![Violation {
            kind: "overflow".into(),
            message: "an offset plus its buffer's size exceeds 2^64".into(),
            buffers: vec![],
        }]);
    };
    let report = py.detach(|| guarded(|| Ok(checker::check(core, &plan))))?;
    Ok(report.violations.iter().map(violation).collect())
}

/// Plans a traced PyTorch training step (`memplan-torch-trace` JSON text) with the swap
/// method and returns the plan as JSON text (`memplan-torch-plan`); `memplan.torch.plan`
/// wraps it. Exactly one goal: `budget` (bytes of peak tensor memory) or `max_overhead`
/// (allowed step-time increase, 0.1 = 10 %). `th_tts_ms`, `th_size` and `max_count` fix
/// the method's thTTS, thS and N (searched when `None`).
#[pyfunction]
#[pyo3(signature = (trace, *, budget = None, max_overhead = None, to_host = true, codec = None, recompute = false, planner = "method", improvements = true, th_tts_ms = None, th_size = None, max_count = None, source = "<trace>"))]
#[allow(clippy::too_many_arguments)]
fn swap_plan_trace(
    py: Python<'_>,
    trace: &str,
    budget: Option<u64>,
    max_overhead: Option<f64>,
    to_host: bool,
    codec: Option<&str>,
    recompute: bool,
    planner: &str,
    improvements: bool,
    th_tts_ms: Option<f64>,
    th_size: Option<u64>,
    max_count: Option<usize>,
    source: &str,
) -> Result<String> {
    if let Some(t) = th_tts_ms {
        if !(t.is_finite() && t >= 0.0) {
            return Err(error::value(format!("th_tts_ms {t} is not a time >= 0")));
        }
    }
    use memplan_swap::planner::{Goal, Improvements, Planner, Setup};
    use memplan_swap::rewrite::{Codec, Reduction};
    let parsed =
        memplan_swap::torch::parse(trace, source).map_err(|e| error::format(e.to_string()))?;

    let goal = match (budget, max_overhead) {
        (Some(b), None) => Goal::Budget(b),
        (None, Some(o)) if o.is_finite() && o >= 0.0 => Goal::MaxOverhead(o),
        (None, Some(o)) => {
            return Err(error::value(format!(
                "max_overhead {o} is not a number >= 0"
            )))
        }
        (None, None) => return Err(error::value("give a goal: budget (bytes) or max_overhead")),
        (Some(_), Some(_)) => return Err(error::value("give budget or max_overhead, not both")),
    };
    let codec = match codec {
        None => None,
        Some("fp16") => Some(Codec::Fp16),
        Some("fp24") => Some(Codec::Fp24),
        Some("int8") => Some(Codec::Int8),
        Some(other) => {
            return Err(error::value(format!(
                "codec {other:?} is not one of 'fp16', 'fp24', 'int8' (or None)"
            )))
        }
    };
    if recompute && (to_host || codec.is_some()) {
        return Err(error::value(
            "recompute=True deletes and recomputes: give it with to_host=False and no codec",
        ));
    }
    if !recompute && !to_host && codec.is_none() {
        return Err(error::value(
            "to_host=False needs a codec: a reduction copies to the store, compresses, or both",
        ));
    }
    let reduction = Reduction {
        to_host,
        codec,
        recompute,
    };
    let step = memplan_swap::torch::training_step(&parsed, source, &reduction)
        .map_err(|e| error::format(e.to_string()))?;
    let imp = if improvements {
        Improvements::ALL
    } else {
        Improvements::NONE
    };
    let planner = match planner {
        "method" => Planner::Method(imp),
        "lms" => Planner::Lms,
        "everything" => Planner::Everything,
        other => {
            return Err(error::value(format!(
                "planner {other:?} is not one of 'method', 'lms', 'everything'"
            )))
        }
    };
    let setup = Setup {
        machine: step.machine,
        reduction,
        goal,
        th_tts_ms,
        th_size_bytes: th_size,
        max_count,
    };
    let plan = py
        .detach(|| memplan_swap::torch::plan(&step, planner, &setup))
        .map_err(|e| error::planning(e.to_string()))?;
    serde_json::to_string(&plan).map_err(error::internal)
}

/// `(name, description)` of every planner.
#[pyfunction]
fn planners() -> Vec<(String, String)> {
    planner::all()
        .iter()
        .map(|p| (p.name().to_string(), p.description().to_string()))
        .collect()
}

/// Reads a plan (plan JSON, or a solution CSV with an `offset` column) for `problem`.
#[pyfunction]
#[pyo3(signature = (text, problem, source = "<string>"))]
fn read_plan(py: Python<'_>, text: &str, problem: Py<Problem>, source: &str) -> Result<PlanResult> {
    let given = problem.clone_ref(py);
    let core = &problem.get().inner;
    let (plan, planner, alignment) = if memplan::io::is_json(text) {
        let summary = json::read_plan_summary(text, source)?;
        (
            json::read_plan_json(text, source, core)?,
            summary.planner,
            summary.alignment.max(1),
        )
    } else {
        (
            csv::read_solution(text, source, core)?,
            "unknown".to_string(),
            1,
        )
    };
    let max_live = bound::max_live(core).unwrap_or(0);
    Ok(PlanResult {
        arena: plan.recomputed_arena(core).unwrap_or(0),
        offsets: plan.offsets,
        lower_bound: max_live,
        max_live,
        alignment,
        planner,
        chosen: None,
        proven_optimal: None,
        stop: None,
        seconds: 0.0,
        names: core.buffers().iter().map(|b| b.name.clone()).collect(),
        problem: given,
    })
}

/// Imports an ONNX model and returns its tensors as a problem (lifetimes by memplan's
/// graph analysis: views share their input's buffer unless `alias=False`, elementwise
/// operators write over a dying input unless `inplace=False`). `input_shapes` gives
/// whole shapes by graph-input name, `dims` values of named dims. A file that cannot be
/// read raises the built-in `OSError` (`FileNotFoundError`, …), a model that cannot be
/// imported `ModelError`.
#[pyfunction]
#[pyo3(signature = (path, input_shapes = None, dims = None, alias = true, inplace = true))]
fn load_onnx(
    py: Python<'_>,
    path: PathBuf,
    #[pyo3(from_py_with = args::input_shapes)] input_shapes: Option<BTreeMap<String, Vec<u64>>>,
    #[pyo3(from_py_with = args::dims)] dims: Option<BTreeMap<String, u64>>,
    alias: bool,
    inplace: bool,
) -> Result<Problem> {
    let options = memplan_onnx::ImportOptions {
        input_shapes: input_shapes.unwrap_or_default(),
        dims: dims.unwrap_or_default(),
        max_dim: None,
    };
    py.detach(|| {
        guarded(|| {
            let graph = memplan_onnx::import_file(&path, &options)?;
            let analysis = memplan_graph::analyse(
                &graph,
                memplan_graph::Order::File,
                memplan_graph::Options { alias, inplace },
            )
            .map_err(|e| error::analysis(&path, e))?;
            Ok(Problem {
                inner: analysis.problem,
            })
        })
    })
}

/// Imports a `.tflite` model's arena as TFLite Micro plans it (16-byte sizes, TFLM's
/// lifetimes, kernel scratch buffers; RESHAPE and in-place sharing unless turned off).
/// A file that cannot be read raises the built-in `OSError` (`FileNotFoundError`, …), a
/// model that cannot be imported `ModelError`.
#[pyfunction]
#[pyo3(signature = (path, alias = true, inplace = true))]
fn load_tflite(py: Python<'_>, path: PathBuf, alias: bool, inplace: bool) -> Result<Problem> {
    py.detach(|| {
        guarded(|| {
            let bytes = read_model_file(&path, memplan_tflite::model::MAX_FILE_BYTES)?;
            let name = path.display().to_string();
            let model = memplan_tflite::read_model(&bytes, &name)?;
            let options = memplan_tflite::ArenaOptions {
                sharing: memplan_tflite::Sharing {
                    reshape: alias,
                    inplace,
                },
                ..memplan_tflite::ArenaOptions::default()
            };
            let arena = memplan_tflite::arena(&model, options, &name)?;
            Ok(Problem {
                inner: arena.problem,
            })
        })
    })
}

/// The bytes of the file at `path`, at most `limit` of them: I/O errors as the built-in
/// `OSError`s (memplan-tflite's own reader keeps only their message), a larger file as
/// `ModelError`.
fn read_model_file(path: &std::path::Path, limit: u64) -> Result<Vec<u8>> {
    use memplan::io::file::FileError;
    let name = || path.display().to_string();
    memplan::io::file::read_bytes_checked(path, limit, memplan_tflite::model::check_identifier)
        .map_err(|e| match e {
            FileError::Io { source, .. } => os_error(&source, path),
            FileError::TooLarge { limit, .. } => memplan_tflite::TfliteError::TooLarge {
                file: name(),
                limit,
            }
            .into(),
            FileError::Refused { message, .. } => memplan_tflite::TfliteError::NotTflite {
                file: name(),
                why: message,
            }
            .into(),
            other => memplan_tflite::TfliteError::Invalid {
                file: name(),
                what: other.to_string(),
            }
            .into(),
        })
}

#[pymodule]
fn _memplan(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MemplanError", m.py().get_type::<MemplanError>())?;
    m.add("InputError", m.py().get_type::<InputError>())?;
    m.add("FormatError", m.py().get_type::<FormatError>())?;
    m.add("ModelError", m.py().get_type::<ModelError>())?;
    m.add("PlanningError", m.py().get_type::<PlanningError>())?;
    m.add_class::<Buffer>()?;
    m.add_class::<Problem>()?;
    m.add_class::<PlanResult>()?;
    m.add_class::<Violation>()?;
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    m.add_function(wrap_pyfunction!(plan_file, m)?)?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(planners, m)?)?;
    m.add_function(wrap_pyfunction!(swap_plan_trace, m)?)?;
    m.add_function(wrap_pyfunction!(read_plan, m)?)?;
    m.add_function(wrap_pyfunction!(load_onnx, m)?)?;
    m.add_function(wrap_pyfunction!(load_tflite, m)?)?;
    Ok(())
}
