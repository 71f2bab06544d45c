//! Runs the `search` planner on CSV files and prints a Markdown table: arena, lower bound,
//! proven optimal, time to the returned plan, total time, nodes.
//!
//! ```text
//! cargo run --release -p memplan --example measure_search -- [--time-limit S] [--threads N]
//!     [--rules -dominance,...] [--nodes N] FILE.csv ...
//! ```
//!
//! Every plan is checked with `memplan::checker::check`.

use std::path::PathBuf;
use std::time::Duration;

use memplan::planner::search::{Rules, Search};
use memplan::{bound, checker, io};

fn main() {
    let mut search = Search::default();
    let mut files: Vec<PathBuf> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().expect("a value after the option");
        match arg.as_str() {
            "--time-limit" => {
                search.time_limit = Duration::from_secs_f64(value().parse().expect("seconds"))
            }
            "--threads" => search.threads = value().parse().expect("a count"),
            "--seed" => search.seed = value().parse().expect("a number"),
            "--nodes" => search.node_limit = Some(value().parse().expect("a count")),
            "--rules" => search.rules = Rules::parse(&value()).expect("rules"),
            _ => files.push(arg.into()),
        }
    }
    println!("| file | buffers | start (best-of) | arena | lower bound | proven | found after | time | nodes | stop |");
    println!("|---|---:|---:|---:|---:|---|---:|---:|---:|---|");
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable file");
        let problem = io::csv::read_problem(&text, &file.display().to_string()).expect("a problem");
        let max_live = bound::max_live(&problem).unwrap_or(0);
        let outcome = search.run(&problem, None).expect("a plan");
        assert!(
            checker::check(&problem, &outcome.plan).is_valid(),
            "invalid plan"
        );
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.3} s | {:.3} s | {} | {} |",
            file.file_name().unwrap_or_default().to_string_lossy(),
            problem.len(),
            outcome.start_arena,
            outcome.arena,
            outcome.lower_bound.max(max_live),
            if outcome.proven_optimal { "yes" } else { "no" },
            outcome.found_after.as_secs_f64(),
            outcome.elapsed.as_secs_f64(),
            outcome.nodes,
            outcome.stop.as_str(),
        );
    }
}
