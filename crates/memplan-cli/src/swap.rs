//! `memplan swap`: method 4 (swap and compression by graph rewriting) on a PipeDream
//! training profile. So far only the no-swap baseline (`--planner none`) runs, with the
//! timing analysis and the tensors the method would choose; see `doc/swap.md`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use memplan_swap::{pipedream, select, simulate, timing};
use serde_json::json;

use crate::table;

/// `--planner`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SwapPlanner {
    /// No swapping: the baseline step time and peak.
    None,
    /// The method as stated (not implemented yet).
    Method,
    /// The TF-LMS-like baseline (not implemented yet).
    Lms,
    /// Every planner (not implemented yet).
    All,
}

/// `--format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SwapFormat {
    /// A human-readable summary.
    Table,
    /// JSON.
    Json,
}

/// The options of `memplan swap`.
pub struct SwapArgs<'a> {
    pub graph: &'a Path,
    pub planner: SwapPlanner,
    pub format: SwapFormat,
    pub write_json: Option<&'a Path>,
    pub write_dot: Option<&'a Path>,
    pub params: select::Params,
}

/// Runs `memplan swap`.
pub fn run(args: &SwapArgs) -> Result<ExitCode> {
    if args.planner != SwapPlanner::None {
        bail!(
            "--planner {}: not implemented yet; only --planner none runs (see doc/swap.md)",
            args.planner
                .to_possible_value()
                .map_or("?".into(), |v| v.get_name().to_string())
        );
    }
    let profile = pipedream::read_file(args.graph)?;
    let step = pipedream::training_step(&profile)?;
    let graph = &step.graph;
    if let Some(path) = args.write_json {
        std::fs::write(path, memplan_graph::write_graph_json(graph))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = args.write_dot {
        std::fs::write(path, memplan_swap::dot::write_dot(graph))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let report = simulate::no_swap(graph)?;
    let times = timing::analyse(graph)?;
    let chosen = select::candidates(graph, &times, &args.params);
    let mut values: Vec<_> = chosen.iter().map(|c| c.value).collect();
    values.sort();
    values.dedup();
    let chosen_bytes: u64 = values.iter().map(|&v| graph.value(v).bytes).sum();
    let name = args.graph.display().to_string();
    let text = match args.format {
        SwapFormat::Table => table::key_values(&[
            ("graph", name),
            ("layers", profile.layers.len().to_string()),
            ("nodes", format!("{} (forward and backward)", report.nodes)),
            ("planner", "none".to_string()),
            (
                "step time",
                format!("{:.3} ms (one compute stream)", report.step_ms),
            ),
            ("critical path", format!("{:.3} ms", times.makespan)),
            ("peak memory", table::bytes(report.peak_bytes)),
            (
                "candidates",
                format!(
                    "{} inputs of {} tensors, {} (TTS > {} ms, size > {} B{})",
                    chosen.len(),
                    values.len(),
                    table::bytes(chosen_bytes),
                    args.params.th_tts_ms,
                    args.params.th_size_bytes,
                    args.params
                        .max_count
                        .map_or(String::new(), |n| format!(", at most {n}"))
                ),
            ),
        ]),
        SwapFormat::Json => {
            let value = json!({
                "graph": name,
                "layers": profile.layers.len(),
                "nodes": report.nodes,
                "planner": "none",
                "step_ms": report.step_ms,
                "critical_path_ms": times.makespan,
                "peak_bytes": report.peak_bytes,
                "candidates": {
                    "th_tts_ms": args.params.th_tts_ms,
                    "th_size_bytes": args.params.th_size_bytes,
                    "max_count": args.params.max_count,
                    "inputs": chosen.len(),
                    "tensors": values.len(),
                    "bytes": chosen_bytes,
                },
            });
            format!("{}\n", serde_json::to_string_pretty(&value)?)
        }
    };
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}
