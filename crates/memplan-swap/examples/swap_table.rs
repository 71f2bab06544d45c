//! The done-when table of `doc/swap.md`: for each PipeDream model and link speed, the
//! peak reduction every planner reaches within 5% step-time overhead, and the step time
//! at a budget of 50% of the no-swap peak.
//!
//! `cargo run --release -p memplan-swap --example swap_table [DIR] [MODEL...]`
//! (DIR defaults to `../shared/benchmarks/pipedream` from the repository root).

use std::path::PathBuf;
use std::time::Instant;

use memplan_swap::pipedream::{read_file, training_step};
use memplan_swap::planner::{plan, Goal, Improvements, Planner, Setup};
use memplan_swap::rewrite::Reduction;
use memplan_swap::simulate::{simulate, Machine};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(
        args.next()
            .unwrap_or_else(|| "../shared/benchmarks/pipedream".into()),
    );
    let mut models: Vec<String> = args.collect();
    if models.is_empty() {
        models = ["resnet50", "vgg16", "densenet121", "inception_v3"]
            .map(String::from)
            .to_vec();
    }
    let planners = [
        ("method (stated)", Planner::Method(Improvements::NONE)),
        (
            "method +link",
            Planner::Method(Improvements {
                link_filter: true,
                ..Improvements::NONE
            }),
        ),
        (
            "method +peak",
            Planner::Method(Improvements {
                rank_at_peak: true,
                ..Improvements::NONE
            }),
        ),
        (
            "method +link+peak",
            Planner::Method(Improvements {
                link_filter: true,
                rank_at_peak: true,
                ..Improvements::NONE
            }),
        ),
        (
            "method +timed-serialization",
            Planner::Method(Improvements {
                timed_serialization: true,
                ..Improvements::NONE
            }),
        ),
        (
            "method +iterate",
            Planner::Method(Improvements {
                iterate: true,
                ..Improvements::NONE
            }),
        ),
        (
            "method +retime",
            Planner::Method(Improvements {
                retime_restores: true,
                ..Improvements::NONE
            }),
        ),
        (
            "method +unserialized",
            Planner::Method(Improvements {
                unserialized: true,
                ..Improvements::NONE
            }),
        ),
        (
            "method +all but retime, unserialized",
            Planner::Method(Improvements {
                retime_restores: false,
                unserialized: false,
                ..Improvements::ALL
            }),
        ),
        ("method +all (iterate)", Planner::Method(Improvements::ALL)),
        ("lms", Planner::Lms),
        ("everything", Planner::Everything),
    ];
    println!("| model | link | planner | peak reduction at <=5% (peak, step) | step at 50% budget (peak) | sims |");
    println!("|---|---:|---|---:|---:|---:|");
    for model in &models {
        let step = training_step(&read_file(&dir.join(format!("{model}.graph.txt")))?)?;
        for gbps in [12.0, 25.0] {
            let machine = Machine::link(gbps * 1e6);
            let base = simulate(&step.graph, &machine)?;
            for (label, planner) in planners {
                let setup = |goal| Setup {
                    machine,
                    reduction: Reduction::SWAP,
                    goal,
                    th_tts_ms: None,
                    th_size_bytes: None,
                    max_count: None,
                };
                let clock = Instant::now();
                let over = plan(&step.graph, planner, &setup(Goal::MaxOverhead(0.05)))?;
                let budget = plan(
                    &step.graph,
                    planner,
                    &setup(Goal::Budget(base.peak_bytes / 2)),
                )?;
                let reduction = 1.0 - over.run.peak_bytes as f64 / base.peak_bytes as f64;
                println!(
                    "| {model} | {gbps} GB/s | {label} | {:.1}% ({:.2} GiB, {:.1} ms, +{:.1}%) | {} ({:.2} GiB, {}) | {} ({:.1} s) |",
                    100.0 * reduction,
                    over.run.peak_bytes as f64 / (1u64 << 30) as f64,
                    over.run.step_ms,
                    100.0 * (over.run.step_ms / base.step_ms - 1.0),
                    format_args!("{:.1} ms (+{:.1}%)", budget.run.step_ms, 100.0 * (budget.run.step_ms / base.step_ms - 1.0)),
                    budget.run.peak_bytes as f64 / (1u64 << 30) as f64,
                    if budget.met { "met" } else { "NOT met" },
                    over.evaluated + budget.evaluated,
                    clock.elapsed().as_secs_f64(),
                );
            }
        }
    }
    Ok(())
}
