//! `plan` as a library: from a loaded input and a planner spec to a checked plan.
//!
//! ```text
//!  Loaded ──► stage (the problem the spec plans: lifetimes, the exclusivity problem,
//!               npu's groups; alignment; the max-live bound) ──► Staged
//!  Staged ──► execute (npu's allocation, search within the time left, or run) ──► Executed
//!  Executed ──► verify (the checker) and, for exclusive, the tensors' lifetimes too
//! ```
//!
//! [`plan_file`] runs all of it for one file; the CLI calls the steps one by one because
//! it times them and formats a solution CSV while the plan is checked.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use memplan::checker::{self, Report};
use memplan::planner::npu::Assignment;
use memplan::planner::search::{self, Search};
use memplan::planner::Strip;
use memplan::{bound, Problem};

use crate::input::{self, GraphSettings, Loaded};
use crate::npu::{NpuOptions, Prepared};
use crate::run::{run, Algorithm, Hooks, Output, Stats};
use crate::spec::{Kind, PlannerSpec};

/// `search`'s reserve for checking and writing its plan, in units of the bound's time.
/// Chosen when the bound was a radix sweep: on 10^6 random buffers with 200 live at once
/// (issue #18) bound 0.20 s, check 1.38 s, writing the CSV plan and the rest about 0.5 s.
/// The bound by its array of steps now takes 0.4-0.5 s at 10^7, so
/// [`RESERVE_NS_PER_BUFFER`] usually decides.
pub const POST_SEARCH_RESERVE: u32 = 10;

/// `search`'s reserve for checking and writing its plan, per buffer, when that is more
/// than [`POST_SEARCH_RESERVE`] gives. Measured at 10^7 random buffers (issue #18): the
/// check, with the solution CSV formatted beside it, and the writing took 2.3 s with 200
/// live at once and 3.0 s with 20,000.
pub const RESERVE_NS_PER_BUFFER: u64 = 350;

/// Everything planning needs besides the input: the spec with every option resolved.
#[derive(Clone)]
pub struct Request {
    pub spec: PlannerSpec,
    /// The graph settings with the spec's exclusive options applied.
    pub settings: GraphSettings,
    /// npu's options with the spec's applied (used by `npu` only).
    pub npu: NpuOptions,
    /// strip's options (for a `strip` spec).
    pub strip: Option<Strip>,
    /// search's options; its time limit counts from when the input was read, and what
    /// checking and writing will take is reserved from it ([`search_options`]).
    pub search: Search,
    /// Every buffer's alignment raised to this (1: as the input says).
    pub alignment: u64,
}

impl Request {
    /// The request of `spec` with default options (best for a library caller: every
    /// option of the spec applied, the flags' defaults elsewhere).
    pub fn new(spec: PlannerSpec, settings: &GraphSettings) -> Result<Request> {
        let settings = spec.settings(settings);
        let strip = spec.strip(None, None)?;
        let npu = NpuOptions {
            platform_file: spec.platform().map(Path::to_path_buf),
            rule: spec.match_rule().unwrap_or_default(),
            group1: spec.group1(),
            layout: spec.layout().unwrap_or_default(),
            slack: spec.slack(),
        };
        Ok(Request {
            spec,
            settings,
            npu,
            strip,
            search: Search::DEFAULT,
            alignment: 1,
        })
    }
}

/// The problem a spec plans, with its bound.
pub struct Staged {
    pub kind: Kind,
    /// What the planner plans: the lifetime problem, the exclusivity problem or npu's,
    /// aligned.
    pub problem: Problem,
    /// Max-live of the lifetime problem (npu's for npu): an exclusive plan is valid for
    /// the lifetimes too, so it is held to that bound.
    pub lower_bound: u64,
    /// How long the bound took (search's reserve is estimated from it).
    pub bound_time: Duration,
    /// npu's prepared problem and groups.
    pub npu: Option<Prepared>,
}

/// Builds the problem `request` plans from `loaded` (read from `file`, named in errors).
/// Planners other than npu and exclusive take `loaded.problem` rather than copy it (on
/// 10^6 buffers the copy took a second and 100 MiB); it is left empty then.
pub fn stage(file: &Path, loaded: &mut Loaded, request: &Request) -> Result<Staged> {
    let kind = request.spec.kind();
    let settings = &request.settings;
    let alignment = request.alignment;
    if settings.fragmented && kind != Kind::Exclusive {
        bail!(
            "--fragmented applies to --planner exclusive only, not to '{}'",
            request.spec.planner(settings).name()
        );
    }
    let keeps_input = matches!(kind, Kind::Npu | Kind::Exclusive);
    let mut problem = if keeps_input {
        loaded.problem.clone()
    } else {
        std::mem::take(&mut loaded.problem)
    };
    if alignment > 1 {
        problem = problem.with_alignment(alignment).with_context(|| {
            format!(
                "cannot apply --alignment {alignment} to '{}'",
                file.display()
            )
        })?;
    }
    let npu = if kind == Kind::Npu {
        let prepared = crate::npu::prepare(file, loaded, settings, &request.npu, alignment)?;
        problem = prepared.problem.clone();
        Some(prepared)
    } else {
        None
    };
    let bound_started = Instant::now();
    let lower_bound = max_live(&problem, file)?;
    let bound_time = bound_started.elapsed();
    if kind == Kind::Exclusive {
        problem = input::exclusive_problem(file, loaded, settings)?;
        if alignment > 1 {
            problem = problem.with_alignment(alignment)?;
        }
    }
    Ok(Staged {
        kind,
        problem,
        lower_bound,
        bound_time,
        npu,
    })
}

/// A run's output, with npu's assignment when npu ran.
pub struct Executed {
    pub output: Output,
    pub npu: Option<Assignment>,
}

/// Runs the planner of `request` on `staged`. `ready` is when the input was read: search's
/// time limit counts from it. `hooks` carry search's progress callback and cancel flag.
pub fn execute(
    staged: &Staged,
    request: &Request,
    ready: Instant,
    hooks: &Hooks,
) -> Result<Executed> {
    let settings = &request.settings;
    let planner = request.spec.planner(settings);
    let result = if let Some(prepared) = &staged.npu {
        let started = Instant::now();
        prepared.assign().map(|a| Executed {
            output: Output {
                plan: a.plan.clone(),
                elapsed: started.elapsed(),
                stats: Stats::None,
            },
            npu: Some(a),
        })
    } else {
        let algorithm = match staged.kind {
            Kind::Search => Algorithm::Search(search_options(
                &request.search,
                &staged.problem,
                ready,
                staged.lower_bound,
                staged.bound_time,
            )),
            Kind::BestOf => Algorithm::BestOf,
            Kind::Strip => Algorithm::Strip(request.strip.unwrap_or(Strip::DEFAULT)),
            _ => Algorithm::Planner(planner),
        };
        run(&staged.problem, &algorithm, hooks).map(|output| Executed { output, npu: None })
    };
    result.with_context(|| format!("planner '{}' could not plan", planner.name()))
}

/// search's options for one run: `options` with the time limit counted from `ready` and
/// a reserve for what follows the search (the check of its plan and the writing of the
/// output), estimated as [`POST_SEARCH_RESERVE`] times `bound_time` or
/// [`RESERVE_NS_PER_BUFFER`] per buffer, whichever is more, and at most 7/10 of the
/// limit; the max-live bound already computed is handed over.
pub fn search_options(
    options: &Search,
    problem: &Problem,
    ready: Instant,
    lower_bound: u64,
    bound_time: Duration,
) -> Search {
    let limit = options.time_limit;
    let per_buffer =
        Duration::from_nanos(RESERVE_NS_PER_BUFFER.saturating_mul(problem.len() as u64));
    let reserve = bound_time
        .saturating_mul(POST_SEARCH_RESERVE)
        .max(per_buffer)
        .min(limit.mul_f64(0.7));
    Search {
        time_limit: limit.saturating_sub(ready.elapsed() + reserve),
        max_live: Some(lower_bound),
        ..*options
    }
}

/// An exclusive plan must be valid for the tensors' lifetimes too (rule 4): holds it to
/// that, an internal error if not. Other kinds: nothing to do.
pub fn check_lifetimes(
    file: &Path,
    staged: &Staged,
    loaded: &Loaded,
    alignment: u64,
    plan: &memplan::Plan,
) -> Result<()> {
    if staged.kind != Kind::Exclusive {
        return Ok(());
    }
    let mut lifetimes = loaded.problem.clone();
    if alignment > 1 {
        lifetimes = lifetimes.with_alignment(alignment)?;
    }
    let report = checker::check(&lifetimes, plan);
    if let Some(violation) = report.violations.first() {
        bail!(
            "internal error: the exclusive plan of '{}' breaks the tensors' lifetimes: {violation}; please report this bug",
            file.display()
        );
    }
    Ok(())
}

/// A checked plan of one file.
pub struct Planned {
    pub loaded: Loaded,
    pub staged: Staged,
    pub executed: Executed,
    /// The checker's report on the plan (valid).
    pub report: Report,
}

/// Reads `file`, plans it as `request` says, and checks the plan (and, for exclusive,
/// the tensors' lifetimes): the whole of `memplan plan` before its output.
pub fn plan_file(file: &Path, request: &Request, hooks: &Hooks) -> Result<Planned> {
    let mut loaded = input::read_input(file, &request.settings)?;
    let ready = Instant::now();
    let staged = stage(file, &mut loaded, request)?;
    let executed =
        execute(&staged, request, ready, hooks).with_context(|| format!("'{}'", file.display()))?;
    let planner = request.spec.planner(&request.settings).name();
    let report = crate::run::verify(&staged.problem, &executed.output.plan, planner)
        .with_context(|| format!("'{}'", file.display()))?;
    check_lifetimes(
        file,
        &staged,
        &loaded,
        request.alignment,
        &executed.output.plan,
    )?;
    Ok(Planned {
        loaded,
        staged,
        executed,
        report,
    })
}

/// Max-live of `problem`, or an error naming the step whose live bytes overflow 64 bits
/// and its largest buffers.
pub fn max_live(problem: &Problem, file: &Path) -> Result<u64> {
    bound::max_live(problem).with_context(|| {
        let Some(overflow) = bound::live_overflow(problem) else {
            return format!("'{}': the live bytes overflow 64 bits", file.display());
        };
        let mut live: Vec<&memplan::Buffer> =
            overflow.live.iter().map(|&id| problem.buffer(id)).collect();
        live.sort_by_key(|b| std::cmp::Reverse(b.size));
        let largest: Vec<String> = live
            .iter()
            .take(3)
            .map(|b| {
                format!(
                    "'{}' ({} bytes)",
                    memplan::render::printable(&b.name),
                    b.size
                )
            })
            .collect();
        format!(
            "'{}': the {} buffers live at step {} add up to more than 2^64 bytes \
             (largest: {}); no arena can hold them: check these sizes in the file",
            file.display(),
            live.len(),
            overflow.step,
            largest.join(", ")
        )
    })
}

/// search's progress line type, re-exported for shells that show it.
pub type Progress = search::Progress;
