//! The subcommands.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use memplan::io::{c_header, csv, json};
use memplan::plan::tensors;
use memplan::planner::search::{self, Rules, Search};
use memplan::planner::{self, best_of, Planner, Strip, StripOutcome};
use memplan::render::{ascii, svg, Scene};
use memplan::{checker, Plan, Problem};
use serde_json::json;

use memplan_graph::{Analysis, Graph};

use crate::input::GraphSettings;
use crate::spec::{Kind, PlannerSpec};
use crate::table::{bytes, columns, key_values, millis, ratio};
use crate::{input, progress, Format, ReportFormat, SearchArgs};
use memplan_session::plan::{self as session, max_live};
use memplan_session::run::{run, Algorithm, Hooks};

pub use crate::inspect::inspect;

/// Problems with at most this many buffers get a per-buffer listing in the table.
const LISTED_BUFFERS: usize = 32;

/// Prints the time of a phase of `memplan plan` on stderr when `MEMPLAN_TIMINGS` is set
/// (for the scale measurements of issue #18).
fn phase(name: &str, since: Instant) {
    if std::env::var_os("MEMPLAN_TIMINGS").is_some() {
        noteln!("timing: {name} {:.3} s", since.elapsed().as_secs_f64());
    }
}

/// What one planner run produced, with best-of's attempts when it ran best-of.
struct Outcome {
    plan: Plan,
    elapsed: Duration,
    /// For best-of: the planner whose plan was kept.
    chosen: Option<&'static str>,
    /// For best-of: every planner tried, with its arena (or error) and time.
    attempts: Vec<best_of::Attempt>,
    /// For strip: its options and how the tuning went.
    strip: Option<(Strip, StripOutcome)>,
    /// For search: whether the plan is proven optimal, nodes, why it stopped.
    search: Option<search::Outcome>,
    /// The default planner ran (no `--planner`): its time budget.
    default_budget: Option<Duration>,
}

/// search's options from the command line (its time limit counts from when the input
/// was read: see [`memplan_session::plan::search_options`]).
fn search_options(args: &SearchArgs) -> Result<Search> {
    Ok(Search {
        time_limit: args
            .time_limit
            .map_or(Search::DEFAULT.time_limit, Duration::from_secs_f64),
        node_limit: args.node_limit,
        seed: args.seed,
        threads: args.threads,
        rules: Rules::parse(&args.search_rules).map_err(anyhow::Error::msg)?,
        capacity: args.capacity,
        max_live: None,
    })
}

/// Runs `work` with a bar of the search's time limit on stderr (a terminal only): its
/// best arena, its bound and its nodes as it goes.
fn with_search_progress<T: Send>(limit: Duration, work: impl FnOnce(&Hooks) -> T + Send) -> T {
    progress::with_time_bar("search", limit, |message| {
        let show = |p: search::Progress| {
            message(format!(
                "best {}, bound {}, {} nodes",
                memplan::render::short_bytes(p.best),
                memplan::render::short_bytes(p.lower_bound),
                p.nodes
            ))
        };
        let hooks = Hooks {
            progress: Some(&show),
            cancel: None,
        };
        work(&hooks)
    })
}

impl From<memplan_session::run::Output> for Outcome {
    fn from(out: memplan_session::run::Output) -> Outcome {
        use memplan_session::run::Stats;
        let (chosen, attempts, strip, search) = match out.stats {
            Stats::None => (None, Vec::new(), None, None),
            Stats::BestOf { chosen, attempts } => (Some(chosen), attempts, None, None),
            Stats::Strip { options, outcome } => {
                (None, Vec::new(), Some((options, *outcome)), None)
            }
            Stats::Search(outcome) => (None, Vec::new(), None, Some(*outcome)),
        };
        Outcome {
            plan: out.plan,
            elapsed: out.elapsed,
            chosen,
            attempts,
            strip,
            search,
            default_budget: None,
        }
    }
}

/// The options of `memplan plan` beyond the common ones.
pub struct PlanExtras<'a> {
    /// Where to write the SVG picture.
    pub svg: Option<&'a Path>,
    /// strip's `--metric`.
    pub metric: Option<&'a str>,
    /// strip's `--max-iters`.
    pub max_iters: Option<u32>,
    /// search's `--time-limit`, `--seed`, `--threads`, `--search-rules`.
    pub search: &'a SearchArgs,
    /// npu's `--platform` and `--match`.
    pub npu: &'a crate::npu::NpuArgs,
    /// `--write-offline-plan`: where to write a `.tflite` with the plan embedded.
    pub write_offline_plan: Option<&'a Path>,
    /// `--base`: the pool's base address; outputs then report addresses.
    pub base: Option<u64>,
}

/// `memplan report`: the page written to `output`, one line per plan on stdout; exit 1
/// when a plan drawn is invalid.
pub fn report(
    file: &Path,
    planners: &[String],
    compare: &[PathBuf],
    output: &Path,
    alignment: u64,
    settings: &GraphSettings,
    search: &SearchArgs,
) -> Result<ExitCode> {
    // No planner named: the default planner, within its budget unless a limit is given.
    let mut options = search_options(search)?;
    if planners.is_empty() && search.time_limit.is_none() {
        options.time_limit = memplan_session::spec::DEFAULT_TIME_LIMIT;
    }
    let request = memplan_session::report::ReportRequest {
        planners: planners.to_vec(),
        compare: compare.to_vec(),
        settings: settings.clone(),
        search: options,
        alignment,
    };
    let searching = planners
        .iter()
        .any(|p| p.split(':').next() == Some("search"));
    let built = if searching {
        with_search_progress(request.search.time_limit, |hooks| {
            memplan_session::report::report_file(file, &request, hooks)
        })
    } else {
        progress::with_spinner(format!("report of '{}'", file.display()), || {
            memplan_session::report::report_file(file, &request, &Hooks::default())
        })
    }?;
    emit(&built.html, Some(output))?;
    let mut text = String::new();
    for plan in &built.plans {
        let verdict = if plan.valid {
            "valid".to_string()
        } else {
            format!("INVALID ({} violations)", plan.violations)
        };
        text.push_str(&format!(
            "{}: {verdict}, arena {}, arena/bound {}\n",
            memplan::render::printable(&plan.title),
            plan.arena.map_or("-".into(), bytes),
            plan.arena
                .map_or("-".into(), |a| ratio(a, plan.lower_bound)),
        ));
    }
    text.push_str(&format!(
        "wrote '{}' ({}): open it in a browser\n",
        output.display(),
        memplan::render::short_bytes(built.html.len() as u64)
    ));
    emit(&text, None)?;
    Ok(if built.valid() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `memplan plan`.
pub fn plan(
    file: &Path,
    planner_name: Option<&str>,
    format: Format,
    output: Option<&Path>,
    alignment: u64,
    settings: &GraphSettings,
    extras: &PlanExtras<'_>,
) -> Result<ExitCode> {
    // No planner named: the default, search within its small budget (unless a time
    // limit is given), and the outputs say so.
    let defaulted = planner_name.is_none();
    let planner_name = planner_name.unwrap_or(memplan_session::spec::DEFAULT_PLANNER);
    // A spec's options (`exclusive:rules=edges`, `npu:match=lifetime`) override the flags.
    let spec = PlannerSpec::parse(planner_name)?;
    let settings = &spec.settings(settings);
    let npu_args = &crate::npu::spec_args(&spec, extras.npu);
    let planner = spec.planner(settings);
    let kind = spec.kind();
    if kind != Kind::Npu && npu_args.is_set() {
        bail!(
            "--platform, --match, --group1, --npu-layout and --slack apply to --planner npu only, not to '{}'",
            planner.name()
        );
    }
    let request = session::Request {
        spec: spec.clone(),
        settings: settings.clone(),
        npu: npu_args.options(),
        strip: spec.strip(extras.metric, extras.max_iters)?,
        search: Search {
            time_limit: match extras.search.time_limit {
                None if defaulted => memplan_session::spec::DEFAULT_TIME_LIMIT,
                _ => search_options(extras.search)?.time_limit,
            },
            ..search_options(extras.search)?
        },
        alignment,
    };
    let read_started = Instant::now();
    let mut loaded = input::read_input(file, settings)?;
    phase("read", read_started);
    let ready = Instant::now();
    if extras.write_offline_plan.is_some() && loaded.tflite.is_none() {
        bail!(
            "--write-offline-plan applies to .tflite models only, and '{}' is not one",
            file.display()
        );
    }
    let staged = session::stage(file, &mut loaded, &request)?;
    phase("bound", ready);
    let lower_bound = staged.lower_bound;
    let npu = staged.npu.as_ref();
    let problem = &staged.problem;
    let executed = if kind == Kind::Search {
        with_search_progress(request.search.time_limit, |hooks| {
            session::execute(&staged, &request, ready, hooks)
        })
    } else {
        let message = format!("{}: {} buffers", planner.name(), problem.len());
        progress::with_spinner(message, || {
            session::execute(&staged, &request, ready, &Hooks::default())
        })
    };
    phase("plan", ready);
    let check_started = Instant::now();
    let executed = executed.with_context(|| format!("'{}'", file.display()))?;
    let npu_assignment = executed.npu;
    let mut outcome = Outcome::from(executed.output);
    outcome.default_budget = defaulted.then_some(request.search.time_limit);
    // A solution CSV is formatted while the plan is checked (at 10^7 buffers each takes
    // about a second); it is written only if the plan is valid.
    let plain_csv =
        matches!(format, Format::Csv) && !outcome.plan.is_fragmented() && extras.base.is_none();
    let (report, mut solution_csv) = std::thread::scope(|scope| {
        let formatting =
            plain_csv.then(|| scope.spawn(|| csv::write_solution(problem, &outcome.plan)));
        let report = memplan_session::run::verify(problem, &outcome.plan, planner.name());
        (report, formatting.and_then(|f| f.join().ok()))
    });
    phase("check", check_started);
    let write_started = Instant::now();
    let report = report.with_context(|| format!("'{}'", file.display()))?;
    session::check_lifetimes(file, &staged, &loaded, alignment, &outcome.plan)?;
    let arena = report.arena_bytes.unwrap_or(0);
    let tflm = match &loaded.tflite {
        Some(input) => {
            crate::tflite::warn_caveats(&input.arena, file);
            Some(crate::tflite::outcome(input, &outcome.plan, file)?)
        }
        None => None,
    };
    if let (Some(input), Some(tflm), Some(out)) = (&loaded.tflite, &tflm, extras.write_offline_plan)
    {
        crate::tflite::write_offline_plan(input, tflm, file, out)?;
    }
    let base = extras.base.unwrap_or(0);
    tensors::pool_end(base, arena).with_context(|| format!("--base {base:#x}"))?;
    // Every tensor's place (the `exclusive` method, Deployment); npu re-analysed the graph. Only
    // plan JSON and the C header list them: for a solution CSV of 10^7 buffers they
    // were two copies of every name (seconds, and a gigabyte).
    let tensor_addresses = if matches!(format, Format::Json | Format::C) {
        let analysed;
        let slots = match npu.as_ref().and_then(|p| p.graph.as_ref()) {
            Some(part) => {
                analysed = part.analysis.tensor_slots(&part.graph);
                &analysed
            }
            None => &loaded.tensors,
        };
        tensors::addresses(problem, &outcome.plan, slots, base)
            .with_context(|| format!("--base {base:#x}"))?
    } else {
        Vec::new()
    };
    let text = match format {
        Format::Json => {
            let mut extra = serde_json::Map::new();
            if let Some(base) = extras.base {
                extra.insert("base_address".into(), json!(base));
            }
            extra.insert(
                "ratio".into(),
                json!(arena as f64 / lower_bound.max(1) as f64),
            );
            if let Some(chosen) = outcome.chosen {
                extra.insert("chosen_planner".into(), json!(chosen));
            }
            if let Some((_, analysis)) = &loaded.graph {
                let stats = &analysis.stats;
                extra.insert("alias_saved_bytes".into(), json!(stats.alias_saved_bytes));
                extra.insert(
                    "inplace_saved_bytes".into(),
                    json!(stats.inplace_saved_bytes),
                );
                extra.insert(
                    "max_live_unshared_bytes".into(),
                    json!(stats.max_live_unshared_bytes),
                );
            }
            if let Some((options, strip)) = &outcome.strip {
                extra.insert("metric".into(), json!(strip.variant.metric.to_string()));
                extra.insert("order".into(), json!(strip.variant.direction.name()));
                extra.insert("placement".into(), json!(strip.variant.placement.name()));
                extra.insert("variants_run".into(), json!(strip.variants_run));
                extra.insert("max_iters".into(), json!(options.max_iters));
                extra.insert("iterations".into(), json!(strip.iterations));
                extra.insert("stop".into(), json!(strip.stop.name()));
                extra.insert("first_arena_bytes".into(), json!(strip.first_arena));
                extra.insert("best_iteration".into(), json!(strip.best_iteration));
            }
            if let Some(stats) = exclusive_stats(planner, problem, &outcome.plan) {
                extra.insert("buffers".into(), json!(stats.buffers));
                extra.insert("reused_bytes".into(), json!(stats.reused_bytes));
                extra.insert("new_pool_bytes".into(), json!(stats.new_pool_bytes));
                extra.insert("exclusive_pairs".into(), json!(problem.conflicts().len()));
                // What `memplan check` needs to rebuild this exclusive problem.
                extra.insert(
                    "exclusive_rules".into(),
                    json!(settings.exclusive_rules.to_string()),
                );
                extra.insert("fragmented".into(), json!(settings.fragmented));
                extra.insert(
                    "exclusive_orders".into(),
                    json!(if settings.all_orders { "all" } else { "one" }),
                );
            }
            if let (Some(prepared), Some(assignment)) = (&npu, &npu_assignment) {
                crate::npu::json_extras(prepared, assignment, &mut extra);
            }
            if let (Some(input), Some(tflm)) = (&loaded.tflite, &tflm) {
                crate::tflite::json_extras(input, tflm, &mut extra);
            }
            if let Some(budget) = outcome.default_budget {
                extra.insert("default_planner".into(), json!(true));
                extra.insert("time_limit_s".into(), json!(budget.as_secs_f64()));
            }
            if let Some(search) = &outcome.search {
                extra.insert("start_arena_bytes".into(), json!(search.start_arena));
                extra.insert("proven_optimal".into(), json!(search.proven_optimal));
                extra.insert("search_nodes".into(), json!(search.nodes));
                extra.insert("search_stop".into(), json!(search.stop.as_str()));
                extra.insert("search_lower_bound".into(), json!(search.lower_bound));
                if let Some(capacity) = extras.search.capacity {
                    extra.insert("search_capacity".into(), json!(capacity));
                    extra.insert("capacity_met".into(), json!(search.capacity_met));
                }
            }
            extra.insert(
                "planning_ms".into(),
                json!(outcome.elapsed.as_secs_f64() * 1e3),
            );
            let summary = json::PlanSummary {
                planner: planner.name().to_string(),
                lower_bound_bytes: lower_bound,
                alignment,
                extra,
            };
            json::write_plan_json(problem, &outcome.plan, &summary, Some(&tensor_addresses))
        }
        Format::Csv if outcome.plan.is_fragmented() => bail!(
            "a solution CSV has one offset per buffer and cannot carry the pieces of a fragmented plan (some blocks lie in several pieces); use --format json (every buffer's and tensor's pieces, read back by `memplan check`) or --format c (every tensor's pieces, for a device build)"
        ),
        Format::Csv if extras.base.is_some() => bail!(
            "a solution CSV holds offsets from the arena's start, which `memplan check` reads back; for addresses use --format json or --format c with --base"
        ),
        Format::Csv => solution_csv
            .take()
            .unwrap_or_else(|| csv::write_solution(problem, &outcome.plan)),
        Format::C => {
            let title = format!("{}, planner {}", file.display(), planner.name());
            let guard = file
                .file_name()
                .map_or_else(|| "plan".into(), |n| n.to_string_lossy().into_owned());
            c_header::write_c_header(
                problem,
                &tensor_addresses,
                &c_header::HeaderInfo {
                    title: &title,
                    guard: &guard,
                    arena_bytes: arena,
                    alignment: problem_alignment(problem, alignment),
                    base: extras.base,
                    fragmented: outcome.plan.extents.is_some(),
                },
            )
        }
        Format::Table => {
            let mut graph = loaded
                .graph
                .as_ref()
                .map(|(g, a)| graph_rows(g, a, settings))
                .unwrap_or_default();
            if let Some(stats) = exclusive_stats(planner, problem, &outcome.plan) {
                if settings.all_orders {
                    graph.push((
                        "exclusive rules",
                        "all orders: blocks share only when one is dead before the other is produced in every execution order".to_string(),
                    ));
                } else {
                    graph.push(("exclusive rules", rules_with_live(settings.exclusive_rules)));
                }
                if settings.fragmented {
                    let spread = problem
                        .ids()
                        .filter(|&id| outcome.plan.extents_of(id, problem.buffer(id).size).len() > 1)
                        .count();
                    graph.push((
                        "fragmented",
                        format!("yes, {spread} blocks in several pieces"),
                    ));
                }
                graph.push(("exclusive pairs", problem.conflicts().len().to_string()));
                graph.push((
                    "pool",
                    format!(
                        "{} blocks, {} reused, {} new pool",
                        stats.buffers,
                        bytes(stats.reused_bytes),
                        bytes(stats.new_pool_bytes)
                    ),
                ));
            }
            if let (Some(prepared), Some(assignment)) = (&npu, &npu_assignment) {
                graph.extend(crate::npu::table_rows(prepared, assignment));
            }
            if let (Some(input), Some(tflm)) = (&loaded.tflite, &tflm) {
                graph.extend(crate::tflite::table_rows(input, tflm));
                if let Some(out) = extras.write_offline_plan {
                    graph.push(("offline plan written", out.display().to_string()));
                }
            }
            if let Some(base) = extras.base {
                graph.push(("base address", format!("{base:#x}")));
                graph.push((
                    "pool addresses",
                    format!("{base:#x} .. {:#x}", base + arena),
                ));
            }
            plan_table(
                file,
                problem,
                planner,
                &outcome,
                TableNumbers {
                    arena,
                    lower_bound,
                    base: extras.base,
                },
                graph,
            )
        }
        Format::Ascii => ascii::render(
            &Scene {
                problem,
                plan: &outcome.plan,
                title: &picture_title(file, planner),
            },
            Some(lower_bound),
        ),
    };
    emit(&text, output)?;
    phase("write", write_started);
    if let Some(path) = extras.svg {
        let picture = svg::render(
            &Scene {
                problem,
                plan: &outcome.plan,
                title: &picture_title(file, planner),
            },
            Some(lower_bound),
        );
        std::fs::write(path, picture)
            .with_context(|| format!("cannot write the SVG to '{}'", path.display()))?;
    }
    // Decision mode (`--capacity`): the exit status says whether a plan fits.
    let mut code = ExitCode::SUCCESS;
    if let (Some(capacity), Some(search)) = (extras.search.capacity, &outcome.search) {
        let (arena, bound) = (search.arena, search.lower_bound);
        let (verdict, status) = match search.capacity_met {
            Some(true) => (format!("a plan fits: its arena is {arena} bytes"), 0),
            Some(false) => (
                format!(
                    "no plan fits (proven: no arena below {bound} bytes exists); the plan written is the best found, {arena} bytes, above the capacity"
                ),
                3,
            ),
            None => (
                format!(
                    "undecided (limit reached): the best plan found has {arena} bytes, above the capacity, and no arena below {bound} bytes is possible"
                ),
                4,
            ),
        };
        noteln!("search: capacity {capacity} bytes: {verdict}");
        code = ExitCode::from(status);
    }
    // The process ends next and takes its memory back at once: freeing a problem of 10^7
    // buffers name by name took 0.4 s more (issue #18).
    std::mem::forget((problem, loaded, outcome, text));
    Ok(code)
}

/// The alignment every offset of `problem` honours: the largest of `--alignment` and every
/// buffer's own (a multiple of each, since alignments here are what the buffers need).
fn problem_alignment(problem: &Problem, alignment: u64) -> u64 {
    problem
        .buffers()
        .iter()
        .map(|b| b.alignment)
        .fold(alignment, u64::max)
}

/// The rules as `--exclusive-rules` spells them, followed by rule 4 (`live`, always on).
fn rules_with_live(rules: memplan_graph::Rules) -> String {
    if rules == memplan_graph::Rules::NONE {
        "live".into()
    } else {
        format!("{rules},live")
    }
}

/// The method's statistics when `planner` is `exclusive`.
fn exclusive_stats(
    planner: &dyn Planner,
    problem: &Problem,
    plan: &Plan,
) -> Option<planner::ExclusiveStats> {
    (Kind::of(planner) == Kind::Exclusive)
        .then(|| planner::exclusive_stats(problem, plan))
        .flatten()
}

/// `planner on file-name`, the heading of the pictures.
fn picture_title(file: &Path, planner: &dyn Planner) -> String {
    let name = file.file_name().map_or_else(
        || file.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    format!("{} on {name}", planner.name())
}

/// The numbers of a plan table: arena, lower bound, and `--base` when given.
struct TableNumbers {
    arena: u64,
    lower_bound: u64,
    base: Option<u64>,
}

fn plan_table(
    file: &Path,
    problem: &Problem,
    planner: &dyn Planner,
    outcome: &Outcome,
    numbers: TableNumbers,
    graph: Vec<(&'static str, String)>,
) -> String {
    let TableNumbers {
        arena,
        lower_bound,
        base,
    } = numbers;
    let planner_line = match (outcome.chosen, outcome.default_budget) {
        (Some(chosen), _) => format!("{} (kept {chosen})", planner.name()),
        (None, Some(budget)) => format!(
            "{} (the default: best-of's plan, improved for at most {} s)",
            planner.name(),
            budget.as_secs_f64()
        ),
        (None, None) => planner.name().to_string(),
    };
    let mut rows = vec![("file", file.display().to_string())];
    rows.extend(graph);
    rows.extend([
        ("buffers", problem.len().to_string()),
        ("planner", planner_line),
        ("arena", bytes(arena)),
        ("lower bound", bytes(lower_bound)),
        ("arena/bound", ratio(arena, lower_bound)),
        ("time", millis(outcome.elapsed)),
    ]);
    if let Some((options, strip)) = &outcome.strip {
        let portfolio = options.variants(problem.len()).len();
        rows.extend([
            (
                "variant",
                format!(
                    "{} (the best of {} variants run, of {})",
                    strip.variant, strip.variants_run, portfolio
                ),
            ),
            ("first arena", bytes(strip.first_arena)),
            (
                "iterations",
                format!(
                    "{} of at most {}{} (best plan from iteration {})",
                    strip.iterations,
                    strip.max_iters,
                    if strip.max_iters < options.max_iters {
                        format!(", capped from {} by the problem size", options.max_iters)
                    } else {
                        String::new()
                    },
                    strip.best_iteration
                ),
            ),
            (
                "stopped by",
                format!("{} ({})", strip.stop.name(), strip.stop.description()),
            ),
        ]);
    }
    if let Some(search) = &outcome.search {
        let proven = if search.proven_optimal { "yes" } else { "no" };
        rows.extend([
            ("best-of's arena", bytes(search.start_arena)),
            ("proven optimal", proven.to_string()),
            ("search lower bound", bytes(search.lower_bound)),
            ("search nodes", search.nodes.to_string()),
            ("stopped by", search.stop.as_str().to_string()),
        ]);
    }
    let mut out = key_values(&rows);
    if !outcome.attempts.is_empty() {
        let rows: Vec<Vec<String>> = outcome
            .attempts
            .iter()
            .map(|a| match &a.result {
                Ok(plan) => {
                    let arena = plan.arena_bytes.unwrap_or(0);
                    vec![
                        a.planner.to_string(),
                        arena.to_string(),
                        ratio(arena, lower_bound),
                        millis(a.elapsed),
                    ]
                }
                Err(e) => vec![
                    a.planner.to_string(),
                    format!("error: {e}"),
                    "-".into(),
                    millis(a.elapsed),
                ],
            })
            .collect();
        out.push('\n');
        out.push_str(&columns(
            &["planner", "arena", "arena/bound", "time"],
            &rows,
        ));
    }
    out.push('\n');
    if problem.len() <= LISTED_BUFFERS {
        let rows: Vec<Vec<String>> = problem
            .ids()
            .map(|id| {
                let b = problem.buffer(id);
                let mut row = vec![
                    b.name.clone(),
                    b.size.to_string(),
                    b.lifetime.to_string(),
                    placement(&outcome.plan, id, b.size),
                    top(&outcome.plan, id, b.size),
                ];
                if let Some(base) = base {
                    // `memplan plan` checked that base + arena fits in 64 bits.
                    row.push(format!("{:#x}", base + outcome.plan.offset(id)));
                }
                row
            })
            .collect();
        let mut header = vec!["buffer", "size", "lifetime", "offset", "top"];
        if base.is_some() {
            header.push("address");
        }
        out.push_str(&columns(&header, &rows));
    } else {
        out.push_str(&format!(
            "({} buffers: use --format csv or --format json for every offset)\n",
            problem.len()
        ));
    }
    out
}

/// A buffer's offset, followed by its extents when it has several.
fn placement(plan: &Plan, id: memplan::BufferId, size: u64) -> String {
    let extents = plan.extents_of(id, size);
    if extents.len() <= 1 {
        return plan.offset(id).to_string();
    }
    let ranges: Vec<String> = extents
        .iter()
        .map(|e| format!("[{}, {})", e.offset, e.offset.saturating_add(e.len)))
        .collect();
    format!("{} ({})", plan.offset(id), ranges.join(" + "))
}

/// A buffer's top, `offset + size` (exclusive); `-` for a buffer in several pieces, whose
/// pieces' ends [`placement`] shows.
fn top(plan: &Plan, id: memplan::BufferId, size: u64) -> String {
    if plan.extents_of(id, size).len() > 1 {
        return "-".into();
    }
    // The plan was checked: its ends fit in 64 bits.
    plan.offset(id).saturating_add(size).to_string()
}

/// Key-value rows describing how a graph became the problem, for the table outputs.
fn graph_rows(
    graph: &Graph,
    analysis: &Analysis,
    settings: &GraphSettings,
) -> Vec<(&'static str, String)> {
    let on_off = |on: bool| if on { "on" } else { "off" };
    let stats = &analysis.stats;
    vec![
        (
            "graph",
            format!(
                "'{}': {} nodes, {} tensors in the arena",
                graph.name,
                graph.nodes().len(),
                stats.arena_values
            ),
        ),
        ("order", settings.order.name().to_string()),
        (
            "aliasing",
            format!(
                "{}, saved {}",
                on_off(settings.options.alias),
                bytes(stats.alias_saved_bytes)
            ),
        ),
        (
            "in-place",
            format!(
                "{}, saved {}",
                on_off(settings.options.inplace),
                bytes(stats.inplace_saved_bytes)
            ),
        ),
        ("max-live unshared", bytes(stats.max_live_unshared_bytes)),
    ]
}

/// `memplan check`.
///
/// The plan of an exclusive planner (a plan JSON that says `"planner": "exclusive"`) is
/// checked against the exclusive problem rebuilt from the model with the plan's recorded
/// `exclusive_rules`, then against the tensors' lifetimes; a shared exclusive pair is
/// reported with its operators and the rule that makes them exclusive. The plan of `npu`
/// is checked against the problem rebuilt with its platform (`--platform`, else the plan's
/// `platform_file`, else the built-in default; see [`crate::npu::plan_platform`]) and its
/// alignment.
pub fn check(
    problem_path: &Path,
    plan_path: &Path,
    format: ReportFormat,
    settings: &GraphSettings,
    platform: &crate::npu::PlatformArg,
) -> Result<ExitCode> {
    // A plan JSON is streamed, once for its summary and once for its plan; a solution CSV
    // is read once.
    let plan_file = input::PlanFile::open(plan_path)?;
    let summary = plan_file.summary()?;
    let all_orders = match &summary {
        Some(summary) => input::exclusive_plan_all_orders(plan_path, summary)?,
        None => false,
    };
    // A plan for every order was made on the every-order analysis: load the model so.
    let loaded = input::read_input(
        problem_path,
        &GraphSettings {
            all_orders,
            ..settings.clone()
        },
    )?;
    let (exclusive_rules, npu_platform) = match &summary {
        Some(summary) => (
            input::exclusive_plan_rules(plan_path, summary)?,
            crate::npu::plan_platform(plan_path, summary, platform)?,
        ),
        None if platform.platform.is_some() => bail!(
            "--platform applies to the plan JSON of --planner npu only, and '{}' is a solution CSV",
            plan_path.display()
        ),
        None => (None, None),
    };
    let alignment = summary.as_ref().map_or(1, |s| s.alignment.max(1));
    let mut npu = None;
    let rebuilt = match (exclusive_rules, npu_platform) {
        (Some(rules), _) => {
            let settings = GraphSettings {
                exclusive_rules: rules,
                all_orders,
                ..settings.clone()
            };
            Some(input::exclusive_problem(problem_path, &loaded, &settings)?)
        }
        (None, Some(platform)) => {
            let args = crate::npu::NpuArgs {
                platform,
                ..Default::default()
            };
            let prepared = crate::npu::prepare(problem_path, &loaded, settings, &args, alignment)?;
            let problem = prepared.problem.clone();
            npu = Some(prepared);
            Some(problem)
        }
        (None, None) => None,
    };
    let (plan, aligned) = plan_file.plan(rebuilt.as_ref().unwrap_or(&loaded.problem), alignment)?;
    drop(plan_file); // a CSV's text back before the check
    let problem = aligned
        .as_ref()
        .unwrap_or(rebuilt.as_ref().unwrap_or(&loaded.problem));
    // The bound of the lifetime problem: the npu problem is that of its platform's analysis.
    let bounded = if npu.is_some() {
        problem
    } else {
        &loaded.problem
    };
    let lower_bound = max_live(bounded, problem_path)?;
    let report = progress::with_spinner(format!("checking {} buffers", problem.len()), || {
        checker::check(problem, &plan)
    });
    let mut violations: Vec<String> = report.violations.iter().map(|v| v.to_string()).collect();
    if let (Some(rules), Some((graph, analysis))) = (exclusive_rules, &loaded.graph) {
        if all_orders {
            // The property the plan claims: valid for every execution order, checked
            // tensor by tensor (a block's in-place writes are not taken on trust).
            let (tensors, tensor_plan, flow) =
                memplan_graph::tensor_dataflow(graph, analysis, &plan)
                    .with_context(|| format!("'{}'", problem_path.display()))?;
            let unordered = checker::check_all_orders(&tensors, &tensor_plan, &flow)
                .with_context(|| format!("'{}'", problem_path.display()))?;
            violations.extend(unordered.iter().map(|u| format!("all orders: {u}")));
        } else {
            let notes = exclusive_notes(graph, analysis, rules, &report.violations);
            for (line, note) in violations.iter_mut().zip(notes) {
                line.push_str(&note);
            }
        }
        // Rule 4 makes an exclusive plan valid for the tensors' lifetimes too.
        let lifetimes = checker::check(&loaded.problem, &plan);
        violations.extend(
            lifetimes
                .violations
                .iter()
                .map(|v| format!("tensor lifetimes: {v}")),
        );
    }
    let valid = violations.is_empty();
    let text = match format {
        ReportFormat::Json => {
            let mut value = json!({
                "valid": valid,
                "buffers": problem.len(),
                "arena_bytes": report.arena_bytes,
                "lower_bound_bytes": lower_bound,
                "violations": violations,
            });
            if let Some(rules) = exclusive_rules {
                value["exclusive_rules"] = json!(rules.to_string());
            }
            if let Some(prepared) = &npu {
                value["platform"] = json!(prepared.platform.name);
                value["platform_file"] = json!(prepared
                    .platform_file
                    .as_ref()
                    .map(|p| p.display().to_string()));
            }
            format!("{}\n", serde_json::to_string_pretty(&value)?)
        }
        ReportFormat::Table => {
            let verdict = if valid {
                format!(
                    "valid: '{}' is a plan for '{}'",
                    plan_path.display(),
                    problem_path.display()
                )
            } else {
                format!(
                    "INVALID: '{}' breaks {} rule(s) of '{}'",
                    plan_path.display(),
                    violations.len(),
                    problem_path.display()
                )
            };
            let arena = report.arena_bytes;
            let mut out = format!("{verdict}\n");
            let mut rows = vec![("buffers", problem.len().to_string())];
            if let Some(rules) = exclusive_rules {
                let what = if all_orders {
                    "exclusive plan for every execution order (from the plan): blocks, then every tensor in every order the edges allow, then tensor lifetimes in the file's order".to_string()
                } else {
                    format!(
                        "exclusive plan (rules {}, from the plan), then tensor lifetimes in the file's order",
                        rules_with_live(rules)
                    )
                };
                rows.push(("checked as", what));
            }
            if let Some(prepared) = &npu {
                let also = if alignment > 1 {
                    format!(", --alignment {alignment}")
                } else {
                    String::new()
                };
                rows.push((
                    "checked as",
                    format!(
                        "npu plan (platform {} ({}){also}, from the plan)",
                        prepared.platform.name,
                        crate::npu::source_name(prepared.platform_file.as_deref())
                    ),
                ));
            }
            rows.extend([
                ("arena", arena.map_or("-".into(), bytes)),
                ("lower bound", bytes(lower_bound)),
                (
                    "arena/bound",
                    arena.map_or("-".into(), |a| ratio(a, lower_bound)),
                ),
            ]);
            out.push_str(&key_values(&rows));
            for violation in &violations {
                out.push_str(&format!("  - {violation}\n"));
            }
            out
        }
    };
    emit(&text, None)?;
    Ok(if valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// For each violation of an exclusive plan, the text to append to its message: for two
/// blocks that share bytes, their operators and the rule that makes them exclusive.
fn exclusive_notes(
    graph: &Graph,
    analysis: &Analysis,
    rules: memplan_graph::Rules,
    violations: &[checker::Violation],
) -> Vec<String> {
    let pairs = memplan_graph::exclusivity(graph, analysis, rules).pairs;
    let operators = memplan_graph::block_operators(graph, analysis);
    let names = |block: memplan::BufferId| {
        let ops = &operators[block.index()];
        if ops.is_empty() {
            "(a graph input)".to_string()
        } else {
            let quoted: Vec<String> = ops
                .iter()
                .map(|&n| format!("'{}'", graph.node(n).name))
                .collect();
            quoted.join(", ")
        }
    };
    violations
        .iter()
        .map(|v| match v {
            checker::Violation::ConflictShared { a, b, .. } => {
                let rule = pairs
                    .binary_search_by(|&(x, y, _)| (x, y).cmp(&(*a, *b)))
                    .map_or("?", |i| pairs[i].2.name());
                format!(
                    "; operators {} and {} are exclusive (rule {rule})",
                    names(*a),
                    names(*b)
                )
            }
            _ => String::new(),
        })
        .collect()
}

/// `memplan bound`.
pub fn bound(file: &Path, format: ReportFormat, settings: &GraphSettings) -> Result<ExitCode> {
    let loaded = input::read_input(file, settings)?;
    let problem = loaded.problem;
    let lower_bound = max_live(&problem, file)?;
    let total = problem.total_size();
    let text = match format {
        ReportFormat::Json => {
            let mut value = json!({
                "buffers": problem.len(),
                "lower_bound_bytes": lower_bound,
                "sum_of_sizes_bytes": total,
            });
            if let Some((_, analysis)) = &loaded.graph {
                let stats = &analysis.stats;
                value["max_live_unshared_bytes"] = json!(stats.max_live_unshared_bytes);
                value["alias_saved_bytes"] = json!(stats.alias_saved_bytes);
                value["inplace_saved_bytes"] = json!(stats.inplace_saved_bytes);
            }
            format!("{}\n", serde_json::to_string_pretty(&value)?)
        }
        ReportFormat::Table => {
            let mut rows = vec![("file", file.display().to_string())];
            if let Some((g, a)) = &loaded.graph {
                rows.extend(graph_rows(g, a, settings));
            }
            rows.extend([
                ("buffers", problem.len().to_string()),
                ("lower bound", format!("{} (max-live)", bytes(lower_bound))),
                (
                    "sum of sizes",
                    total.map_or("overflows 64 bits".into(), bytes),
                ),
            ]);
            key_values(&rows)
        }
    };
    emit(&text, None)?;
    Ok(ExitCode::SUCCESS)
}

/// `memplan planners`.
pub fn planners() -> Result<ExitCode> {
    let all = planner::all();
    let width = all.iter().map(|p| p.name().len()).max().unwrap_or(0);
    let mut text = String::new();
    for p in all {
        text.push_str(&format!("{:<width$}  {}\n", p.name(), p.description()));
    }
    emit(&text, None)?;
    Ok(ExitCode::SUCCESS)
}

/// Writes the output to a file, or to stdout (a closed pipe is not an error).
pub(crate) fn emit(text: &str, output: Option<&Path>) -> Result<()> {
    match output {
        Some(path) => {
            std::fs::write(path, text).with_context(|| format!("cannot write '{}'", path.display()))
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            match stdout
                .write_all(text.as_bytes())
                .and_then(|_| stdout.flush())
            {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                other => other.context("cannot write to standard output"),
            }
        }
    }
}

/// One planner's result on one file in `memplan bench`.
struct BenchRow {
    file: String,
    buffers: usize,
    lower_bound: u64,
    /// The planner spec as written (`exclusive:rules=edges+outputs`), or the plain name.
    planner: String,
    /// The arena, or why there is none.
    arena: std::result::Result<u64, String>,
    /// The fastest of the repeated runs.
    elapsed: Duration,
}

/// `memplan bench`: every planner spec (see [`crate::spec`]) on every file. The flags in
/// `settings` and `npu_args` apply to every spec that does not set the option itself.
pub fn bench(
    files: &[std::path::PathBuf],
    specs: &[String],
    format: crate::BenchFormat,
    repeat: u32,
    settings: &GraphSettings,
    npu_args: &crate::npu::NpuArgs,
) -> Result<ExitCode> {
    let specs: Vec<PlannerSpec> = if specs.is_empty() {
        planner::all()
            .iter()
            .map(|p| PlannerSpec::parse(p.name()))
            .collect::<Result<_>>()?
    } else {
        specs
            .iter()
            .map(|s| PlannerSpec::parse(s))
            .collect::<Result<_>>()?
    };
    if settings.fragmented && !specs.iter().any(|s| s.kind() == Kind::Exclusive) {
        bail!("--fragmented applies to the exclusive planner, which this bench does not run");
    }
    let mut rows = Vec::new();
    for file in files {
        let loaded = input::read_input(file, settings)?;
        let lower_bound = max_live(&loaded.problem, file)?;
        for spec in &specs {
            let settings = spec.settings(settings);
            let planner = spec.planner(&settings);
            let strip = spec.strip(None, None)?;
            // `npu` plans its own problem with the method's groups.
            let npu = if spec.kind() == Kind::Npu {
                let args = crate::npu::spec_args(spec, npu_args);
                Some(crate::npu::prepare(file, &loaded, &settings, &args, 1)?)
            } else {
                None
            };
            // `exclusive` plans the graph's exclusivity problem (an error row without one).
            let problem = if let Some(prepared) = &npu {
                std::borrow::Cow::Borrowed(&prepared.problem)
            } else if spec.kind() == Kind::Exclusive {
                match input::exclusive_problem(file, &loaded, &settings) {
                    Ok(p) => std::borrow::Cow::Owned(p),
                    Err(e) => {
                        rows.push(BenchRow {
                            file: file.display().to_string(),
                            buffers: loaded.problem.len(),
                            lower_bound,
                            planner: spec.label.clone(),
                            arena: Err(format!("{e:#}")),
                            elapsed: Duration::ZERO,
                        });
                        continue;
                    }
                }
            } else {
                std::borrow::Cow::Borrowed(&loaded.problem)
            };
            let problem: &Problem = &problem;
            let algorithm = match (spec.kind(), strip) {
                (Kind::Search, _) => Algorithm::Search(Search::DEFAULT),
                (Kind::BestOf, _) => Algorithm::BestOf,
                (_, Some(strip)) => Algorithm::Strip(strip),
                _ => Algorithm::Planner(planner),
            };
            let message = format!("{} on {}", spec.label, file.display());
            let (result, elapsed) = progress::with_spinner(message, || {
                let mut fastest = Duration::MAX;
                let mut result = None;
                for _ in 0..repeat {
                    let started = Instant::now();
                    let r = match &npu {
                        Some(prepared) => prepared.assign().map(|a| a.plan),
                        None => run(problem, &algorithm, &Hooks::default()).map(|o| o.plan),
                    };
                    fastest = fastest.min(started.elapsed());
                    result = Some(r);
                }
                (result.expect("repeat >= 1"), fastest)
            });
            let arena = match result {
                Ok(plan) => {
                    let report = memplan_session::run::verify(problem, &plan, &spec.label)
                        .with_context(|| format!("'{}'", file.display()))?;
                    Ok(report.arena_bytes.unwrap_or(0))
                }
                Err(e) => Err(e.to_string()),
            };
            // An npu platform may change the problem (its in-place list, planned
            // weights): its row's ratio is against the bound of the problem it planned.
            let lower_bound = match &npu {
                Some(prepared) => max_live(&prepared.problem, file)?,
                None => lower_bound,
            };
            rows.push(BenchRow {
                file: file.display().to_string(),
                buffers: problem.len(),
                lower_bound,
                planner: spec.label.clone(),
                arena,
                elapsed,
            });
        }
    }
    let text = match format {
        crate::BenchFormat::Table => {
            let cells: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    let (arena, quality) = match &r.arena {
                        Ok(a) => (a.to_string(), ratio(*a, r.lower_bound)),
                        Err(e) => (format!("error: {e}"), "-".into()),
                    };
                    vec![
                        r.file.clone(),
                        r.buffers.to_string(),
                        r.lower_bound.to_string(),
                        r.planner.clone(),
                        arena,
                        quality,
                        millis(r.elapsed),
                    ]
                })
                .collect();
            columns(
                &[
                    "file",
                    "buffers",
                    "lower bound",
                    "planner",
                    "arena",
                    "arena/bound",
                    "time",
                ],
                &cells,
            )
        }
        crate::BenchFormat::Json => rows
            .iter()
            .map(|r| {
                let value = json!({
                    "file": r.file,
                    "buffers": r.buffers,
                    "lower_bound_bytes": r.lower_bound,
                    "planner": r.planner,
                    "arena_bytes": r.arena.as_ref().ok(),
                    "error": r.arena.as_ref().err(),
                    "ratio": r.arena.as_ref().ok().map(|&a| a as f64 / r.lower_bound.max(1) as f64),
                    "planning_ms": r.elapsed.as_secs_f64() * 1e3,
                });
                format!("{value}\n")
            })
            .collect(),
        crate::BenchFormat::Markdown => {
            let mut out = String::from("| file | buffers | lower bound |");
            for spec in &specs {
                out.push_str(&format!(" {} |", spec.label));
            }
            out.push_str("\n| --- | ---: | ---: |");
            for _ in &specs {
                out.push_str(" ---: |");
            }
            out.push('\n');
            for chunk in rows.chunks(specs.len()) {
                let first = &chunk[0];
                out.push_str(&format!(
                    "| {} | {} | {} |",
                    first.file, first.buffers, first.lower_bound
                ));
                for r in chunk {
                    match &r.arena {
                        Ok(a) => out.push_str(&format!(
                            " {} ({}) |",
                            ratio(*a, r.lower_bound),
                            millis(r.elapsed)
                        )),
                        Err(_) => out.push_str(" error |"),
                    }
                }
                out.push('\n');
            }
            out
        }
    };
    emit(&text, None)?;
    Ok(ExitCode::SUCCESS)
}
