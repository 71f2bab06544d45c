//! Runs the large-neighbourhood search (`memplan::planner::lns`) alone for a fixed
//! number of rounds from the plan of a start planner (`--start NAME`, default
//! `greedy-size-bestfit`) on each CSV file and prints a Markdown table: start arena, arena after, max-live bound, rounds, kept rounds, time.
//! With a round limit the arenas are deterministic (they depend on the seed only).
//!
//! ```text
//! cargo run --release -p memplan --example measure_lns -- [--rounds N] [--seed S] [--start NAME] FILE.csv ...
//! ```
//!
//! Every plan is checked with `memplan::checker::check`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use memplan::planner;
use memplan::planner::lns::{improve, Limits};
use memplan::{bound, checker, io};

fn main() {
    let mut rounds = 300u64;
    let mut seed = 0u64;
    let mut start_planner = "greedy-size-bestfit".to_string();
    let mut files: Vec<PathBuf> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().expect("a value after the option");
        match arg.as_str() {
            "--rounds" => rounds = value().parse().expect("a count"),
            "--seed" => seed = value().parse().expect("a number"),
            "--start" => start_planner = value(),
            _ => files.push(arg.into()),
        }
    }
    let start_planner = planner::by_name(&start_planner).expect("a planner name");
    println!("| file | buffers | start ({}) | arena | max-live | start/bound | arena/bound | rounds | kept | time |", start_planner.name());
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable file");
        let problem = io::csv::read_problem(&text, &file.display().to_string()).expect("a problem");
        let max_live = bound::max_live(&problem).unwrap_or(0);
        let start = start_planner.plan(&problem).expect("a plan");
        let started = Instant::now();
        let limits = Limits {
            deadline: started + Duration::from_secs(3600),
            rounds,
            target: max_live,
            stop: None,
            cancel: None,
        };
        let improved = improve(&problem, &start, &limits, seed);
        let elapsed = started.elapsed();
        assert!(
            checker::check(&problem, &improved.plan).is_valid(),
            "invalid plan"
        );
        let start_arena = start.arena_bytes.expect("an arena");
        let ratio = |a: u64| a as f64 / max_live.max(1) as f64;
        println!(
            "| {} | {} | {} | {} | {} | {:.4} | {:.4} | {} | {} | {:.3} s |",
            file.file_name().unwrap_or_default().to_string_lossy(),
            problem.len(),
            start_arena,
            improved.arena,
            max_live,
            ratio(start_arena),
            ratio(improved.arena),
            improved.rounds,
            improved.accepted,
            elapsed.as_secs_f64(),
        );
    }
}
