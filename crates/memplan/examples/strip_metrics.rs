//! Measures `strip` under every preset metric: the measurement behind its default.
//!
//! ```text
//! cargo run --release -p memplan --example strip_metrics -- [--max-iters N] [--metric M]... FILE.csv...
//! ```
//!
//! For every metric of `Metric::presets()` plus the three-base combinations (or only the
//! `--metric`s given), plans every
//! file (each plan checked), and prints one Markdown row per metric: the geometric mean of
//! arena / max-live over the files, the worst ratio, how many files reach the bound, the
//! mean number of adjustments and the total time. Rows are sorted best first.

use std::time::Instant;

use memplan::planner::strip::{Direction, Metric, Placement, Strip};
use memplan::{bound, checker, io::csv, Problem};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut max_iters = Strip::DEFAULT_MAX_ITERS;
    if let Some(k) = args.iter().position(|a| a == "--max-iters") {
        max_iters = args[k + 1].parse().expect("--max-iters N");
        args.drain(k..k + 2);
    }
    let mut only: Vec<Metric> = Vec::new();
    while let Some(k) = args.iter().position(|a| a == "--metric") {
        only.push(args[k + 1].parse().expect("--metric M"));
        args.drain(k..k + 2);
    }
    let problems: Vec<(String, Problem, u64)> = args
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).expect("readable file");
            let problem = csv::read_problem(&text, path).expect("a minimalloc CSV");
            let lower = bound::max_live(&problem).expect("no overflow").max(1);
            (path.clone(), problem, lower)
        })
        .collect();
    let mut metrics = Metric::presets();
    for text in [
        "size,length,overlap",
        "length,size,overlap",
        "overlap,size,length",
        "size*length*overlap",
        "size+length+overlap",
    ] {
        metrics.push(text.parse().expect("a metric"));
    }
    if !only.is_empty() {
        metrics = only;
    }
    let mut rows = Vec::new();
    for metric in metrics {
        let strip = Strip {
            metric: Some(metric),
            direction: Some(Direction::Descending),
            placement: Some(Placement::Bottom),
            max_iters,
            max_reads: Strip::DEFAULT_MAX_READS,
        };
        let (mut log_sum, mut worst, mut optimal, mut iterations) = (0f64, 0f64, 0, 0u64);
        let started = Instant::now();
        for (path, problem, lower) in &problems {
            let outcome = strip.run(problem).expect("a plan");
            assert!(
                checker::check(problem, &outcome.plan).is_valid(),
                "{metric} on {path}"
            );
            let ratio = outcome.plan.arena_bytes.unwrap_or(0) as f64 / *lower as f64;
            log_sum += ratio.ln();
            worst = worst.max(ratio);
            optimal += usize::from(ratio <= 1.0);
            iterations += u64::from(outcome.iterations);
        }
        let n = problems.len().max(1) as f64;
        rows.push((
            (log_sum / n).exp(),
            metric.to_string(),
            worst,
            optimal,
            iterations as f64 / n,
            started.elapsed(),
        ));
    }
    rows.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    println!("| metric | geo-mean arena/bound | worst | at bound | mean adjustments | time |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    for (geo, metric, worst, optimal, iterations, time) in rows {
        println!(
            "| `{metric}` | {geo:.4} | {worst:.3} | {optimal}/{} | {iterations:.1} | {:.0} ms |",
            problems.len(),
            time.as_secs_f64() * 1e3
        );
    }
}
