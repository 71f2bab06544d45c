//! The subcommands.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use memplan::io::{csv, json};
use memplan::planner::search::{self, Rules, Search};
use memplan::planner::{self, best_of, Planner};
use memplan::{bound, checker, Plan, Problem};
use serde_json::json;

use crate::table::{bytes, columns, key_values, millis, ratio};
use crate::{input, progress, Format, ReportFormat, SearchArgs};

/// Problems with at most this many buffers get a per-buffer listing in the table.
const LISTED_BUFFERS: usize = 32;

/// What one planner run produced, with best-of's attempts when it ran best-of.
struct Outcome {
    plan: Plan,
    elapsed: Duration,
    /// For best-of: the planner whose plan was kept.
    chosen: Option<&'static str>,
    /// For best-of: every planner tried, with its arena (or error) and time.
    attempts: Vec<best_of::Attempt>,
    /// For search: whether the plan is proven optimal, nodes, why it stopped.
    search: Option<search::Outcome>,
}

/// Runs the search planner with the command-line options, printing a progress line on
/// stderr (overwritten in place on a terminal, one line per update otherwise).
fn run_search(args: &SearchArgs, problem: &Problem) -> Result<Outcome> {
    let rules = Rules::parse(&args.search_rules).map_err(anyhow::Error::msg)?;
    let options = Search {
        time_limit: Duration::from_secs_f64(args.time_limit),
        node_limit: None,
        seed: args.seed,
        threads: args.threads,
        rules,
    };
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let show = |p: search::Progress| {
        let line = format!(
            "search: best {} bytes, bound {} bytes, {} nodes, {:.1} s",
            p.best,
            p.lower_bound,
            p.nodes,
            p.elapsed.as_secs_f64()
        );
        if terminal {
            eprint!("\r{line}\x1b[K");
        } else {
            eprintln!("{line}");
        }
    };
    let started = Instant::now();
    let result = options.run(problem, Some(&show));
    if terminal {
        eprintln!();
    }
    let outcome = result?;
    Ok(Outcome {
        plan: outcome.plan.clone(),
        elapsed: started.elapsed(),
        chosen: None,
        attempts: Vec::new(),
        search: Some(outcome),
    })
}

fn run(planner: &'static dyn Planner, problem: &Problem) -> Result<Outcome> {
    let started = Instant::now();
    if planner.name() == best_of::BestOf.name() {
        let attempts = best_of::run_all(problem);
        let elapsed = started.elapsed();
        let kept = &attempts[best_of::winner(&attempts)?];
        let plan = kept.result.clone()?;
        let chosen = Some(kept.planner);
        return Ok(Outcome {
            plan,
            elapsed,
            chosen,
            attempts,
            search: None,
        });
    }
    let plan = planner.plan(problem)?;
    Ok(Outcome {
        plan,
        elapsed: started.elapsed(),
        chosen: None,
        attempts: Vec::new(),
        search: None,
    })
}

/// `memplan plan`.
pub fn plan(
    file: &Path,
    planner_name: &str,
    format: Format,
    output: Option<&Path>,
    alignment: u64,
    search_args: &SearchArgs,
) -> Result<ExitCode> {
    let planner = planner::by_name(planner_name)?;
    let mut problem = input::read_problem(file)?;
    if alignment > 1 {
        problem = problem.with_alignment(alignment).with_context(|| {
            format!(
                "cannot apply --alignment {alignment} to '{}'",
                file.display()
            )
        })?;
    }
    let lower_bound = bound::max_live(&problem).with_context(|| {
        format!(
            "'{}': the bytes live at one step overflow 64 bits",
            file.display()
        )
    })?;
    let message = format!("{}: {} buffers", planner.name(), problem.len());
    let outcome = if planner.name() == "search" {
        run_search(search_args, &problem)
    } else {
        progress::with_spinner(message, || run(planner, &problem))
    };
    let outcome = outcome.with_context(|| {
        format!(
            "planner '{}' could not plan '{}'",
            planner.name(),
            file.display()
        )
    })?;
    let report = checker::check(&problem, &outcome.plan);
    if !report.is_valid() {
        let list: Vec<String> = report
            .violations
            .iter()
            .take(10)
            .map(|v| format!("  {v}"))
            .collect();
        bail!(
            "internal error: planner '{}' produced an invalid plan for '{}' ({} violations); please report this bug with the input file:\n{}",
            planner.name(),
            file.display(),
            report.violations.len(),
            list.join("\n")
        );
    }
    let arena = report.arena_bytes.unwrap_or(0);
    let text = match format {
        Format::Json => {
            let mut extra = serde_json::Map::new();
            extra.insert(
                "ratio".into(),
                json!(arena as f64 / lower_bound.max(1) as f64),
            );
            if let Some(chosen) = outcome.chosen {
                extra.insert("chosen_planner".into(), json!(chosen));
            }
            if let Some(search) = &outcome.search {
                extra.insert("proven_optimal".into(), json!(search.proven_optimal));
                extra.insert("search_nodes".into(), json!(search.nodes));
                extra.insert("search_stop".into(), json!(search.stop.as_str()));
                extra.insert("search_lower_bound".into(), json!(search.lower_bound));
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
            json::write_plan_json(&problem, &outcome.plan, &summary)
        }
        Format::Csv => csv::write_solution(&problem, &outcome.plan),
        Format::Table => plan_table(file, &problem, planner, &outcome, arena, lower_bound),
    };
    emit(&text, output)?;
    Ok(ExitCode::SUCCESS)
}

fn plan_table(
    file: &Path,
    problem: &Problem,
    planner: &dyn Planner,
    outcome: &Outcome,
    arena: u64,
    lower_bound: u64,
) -> String {
    let planner_line = match outcome.chosen {
        Some(chosen) => format!("{} (kept {chosen})", planner.name()),
        None => planner.name().to_string(),
    };
    let mut summary = vec![
        ("file", file.display().to_string()),
        ("buffers", problem.len().to_string()),
        ("planner", planner_line),
        ("arena", bytes(arena)),
        ("lower bound", bytes(lower_bound)),
        ("arena/bound", ratio(arena, lower_bound)),
        ("time", millis(outcome.elapsed)),
    ];
    if let Some(search) = &outcome.search {
        let proven = if search.proven_optimal { "yes" } else { "no" };
        summary.extend([
            ("proven optimal", proven.to_string()),
            ("search lower bound", bytes(search.lower_bound)),
            ("search nodes", search.nodes.to_string()),
            ("stopped by", search.stop.as_str().to_string()),
        ]);
    }
    let mut out = key_values(&summary);
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
                vec![
                    b.name.clone(),
                    b.size.to_string(),
                    b.lifetime.to_string(),
                    outcome.plan.offset(id).to_string(),
                ]
            })
            .collect();
        out.push_str(&columns(&["buffer", "size", "lifetime", "offset"], &rows));
    } else {
        out.push_str(&format!(
            "({} buffers: use --format csv or --format json for every offset)\n",
            problem.len()
        ));
    }
    out
}

/// `memplan check`.
pub fn check(problem_path: &Path, plan_path: &Path, format: ReportFormat) -> Result<ExitCode> {
    let problem = input::read_problem(problem_path)?;
    let plan = input::read_plan(plan_path, &problem)?;
    let lower_bound = bound::max_live(&problem).with_context(|| {
        format!(
            "'{}': the bytes live at one step overflow 64 bits",
            problem_path.display()
        )
    })?;
    let report = progress::with_spinner(format!("checking {} buffers", problem.len()), || {
        checker::check(&problem, &plan)
    });
    let text = match format {
        ReportFormat::Json => {
            let value = json!({
                "valid": report.is_valid(),
                "buffers": problem.len(),
                "arena_bytes": report.arena_bytes,
                "lower_bound_bytes": lower_bound,
                "violations": report.violations.iter().map(|v| v.to_string()).collect::<Vec<_>>(),
            });
            format!("{}\n", serde_json::to_string_pretty(&value)?)
        }
        ReportFormat::Table => {
            let verdict = if report.is_valid() {
                format!(
                    "valid: '{}' is a plan for '{}'",
                    plan_path.display(),
                    problem_path.display()
                )
            } else {
                format!(
                    "INVALID: '{}' breaks {} rule(s) of '{}'",
                    plan_path.display(),
                    report.violations.len(),
                    problem_path.display()
                )
            };
            let arena = report.arena_bytes;
            let mut out = format!("{verdict}\n");
            out.push_str(&key_values(&[
                ("buffers", problem.len().to_string()),
                ("arena", arena.map_or("-".into(), bytes)),
                ("lower bound", bytes(lower_bound)),
                (
                    "arena/bound",
                    arena.map_or("-".into(), |a| ratio(a, lower_bound)),
                ),
            ]));
            for violation in &report.violations {
                out.push_str(&format!("  - {violation}\n"));
            }
            out
        }
    };
    emit(&text, None)?;
    Ok(if report.is_valid() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `memplan bound`.
pub fn bound(file: &Path, format: ReportFormat) -> Result<ExitCode> {
    let problem = input::read_problem(file)?;
    let lower_bound = bound::max_live(&problem).with_context(|| {
        format!(
            "'{}': the bytes live at one step overflow 64 bits",
            file.display()
        )
    })?;
    let total = problem.total_size();
    let text = match format {
        ReportFormat::Json => {
            let value = json!({
                "buffers": problem.len(),
                "lower_bound_bytes": lower_bound,
                "sum_of_sizes_bytes": total,
            });
            format!("{}\n", serde_json::to_string_pretty(&value)?)
        }
        ReportFormat::Table => key_values(&[
            ("file", file.display().to_string()),
            ("buffers", problem.len().to_string()),
            ("lower bound", format!("{} (max-live)", bytes(lower_bound))),
            (
                "sum of sizes",
                total.map_or("overflows 64 bits".into(), bytes),
            ),
        ]),
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
fn emit(text: &str, output: Option<&Path>) -> Result<()> {
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
    planner: &'static str,
    /// The arena, or why there is none.
    arena: std::result::Result<u64, String>,
    /// The fastest of the repeated runs.
    elapsed: Duration,
}

/// `memplan bench`.
pub fn bench(
    files: &[std::path::PathBuf],
    names: &[String],
    format: crate::BenchFormat,
    repeat: u32,
) -> Result<ExitCode> {
    let planners: Vec<&'static dyn Planner> = if names.is_empty() {
        planner::all().to_vec()
    } else {
        names
            .iter()
            .map(|n| planner::by_name(n))
            .collect::<std::result::Result<_, _>>()?
    };
    let mut rows = Vec::new();
    for file in files {
        let problem = input::read_problem(file)?;
        let lower_bound = bound::max_live(&problem).with_context(|| {
            format!(
                "'{}': the bytes live at one step overflow 64 bits",
                file.display()
            )
        })?;
        for &planner in &planners {
            let message = format!("{} on {}", planner.name(), file.display());
            let (result, elapsed) = progress::with_spinner(message, || {
                let mut fastest = Duration::MAX;
                let mut result = None;
                for _ in 0..repeat {
                    let started = Instant::now();
                    let r = planner.plan(&problem);
                    fastest = fastest.min(started.elapsed());
                    result = Some(r);
                }
                (result.expect("repeat >= 1"), fastest)
            });
            let arena = match result {
                Ok(plan) => {
                    let report = checker::check(&problem, &plan);
                    if !report.is_valid() {
                        bail!(
                            "internal error: planner '{}' produced an invalid plan for '{}': {}; please report this bug",
                            planner.name(),
                            file.display(),
                            report.violations[0]
                        );
                    }
                    Ok(report.arena_bytes.unwrap_or(0))
                }
                Err(e) => Err(e.to_string()),
            };
            rows.push(BenchRow {
                file: file.display().to_string(),
                buffers: problem.len(),
                lower_bound,
                planner: planner.name(),
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
                        r.planner.to_string(),
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
            for p in &planners {
                out.push_str(&format!(" {} |", p.name()));
            }
            out.push_str("\n| --- | ---: | ---: |");
            for _ in &planners {
                out.push_str(" ---: |");
            }
            out.push('\n');
            for chunk in rows.chunks(planners.len()) {
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
