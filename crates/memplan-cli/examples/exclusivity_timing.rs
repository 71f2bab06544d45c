//! Times the exclusive pair search (`memplan_graph::exclusivity`) alone on ONNX models.
//!
//! `cargo run --release -p memplan-cli --example exclusivity_timing -- MODEL.onnx... [--runs N]`
//! prints, per model, the blocks, the exclusive pairs and the fastest and median time of N
//! runs (default 20) of the search under every rule.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use memplan_graph::{analyse, exclusivity, Options, Order, Rules};

fn main() {
    let mut runs = 20usize;
    let mut files = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--runs" {
            runs = match args.next().and_then(|n| n.parse().ok()) {
                Some(n) if n > 0 => n,
                _ => {
                    eprintln!("error: --runs needs a positive number");
                    std::process::exit(2);
                }
            };
        } else {
            files.push(PathBuf::from(arg));
        }
    }
    for file in files {
        let graph = match memplan_onnx::import_file(&file, &Default::default()) {
            Ok(g) => g,
            Err(e) => {
                eprintln!("error: '{}': {e}", file.display());
                std::process::exit(2);
            }
        };
        let analysis = match analyse(&graph, Order::File, Options::default()) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("error: '{}': {e}", file.display());
                std::process::exit(2);
            }
        };
        let mut times: Vec<Duration> = Vec::with_capacity(runs);
        let mut pairs = 0;
        for _ in 0..runs {
            let started = Instant::now();
            pairs = exclusivity(&graph, &analysis, Rules::ALL).pairs.len();
            times.push(started.elapsed());
        }
        times.sort_unstable();
        println!(
            "{}: {} blocks, {} pairs, fastest {:.3} ms, median {:.3} ms ({runs} runs)",
            file.display(),
            analysis.problem.len(),
            pairs,
            times[0].as_secs_f64() * 1e3,
            times[runs / 2].as_secs_f64() * 1e3
        );
    }
}
