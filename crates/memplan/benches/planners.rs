//! Criterion benchmarks of every planner: a synthetic instance (deterministic, 4,000
//! buffers) and, when `../shared` is present, minimalloc's challenging `A` and idealloc's
//! `S_1` (28,526 buffers).
//!
//! ```text
//! cargo bench -p memplan --bench planners            # everything (a few minutes)
//! cargo bench -p memplan --bench planners -- synthetic
//! cargo bench -p memplan --bench planners -- search-challenging
//! ```
//!
//! The `search` planner runs for its whole time limit unless it proves optimality, so it
//! is left out of the per-instance groups and has its own: `search-challenging`, the 11
//! challenging minimalloc instances with a 1 s limit each (the time is the time to a
//! proven optimum where it is reached, else the limit).
//!
//! Kept quick on purpose (10 samples, short measurement): compare planners side by side in
//! one run, as the machines are shared and noisy.

use std::path::Path;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use memplan::planner::Planner;
use memplan::{planner, Buffer, Problem};

/// A deterministic synthetic instance shaped like a network's activations: mostly short
/// lifetimes with a few long ones, sizes spread over three orders of magnitude.
fn synthetic(n: usize) -> Problem {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        // xorshift64*
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let steps = n as u64 * 2;
    let buffers = (0..n)
        .map(|i| {
            let start = next() % steps;
            let len = if next() % 10 == 0 {
                1 + next() % (steps / 4)
            } else {
                1 + next() % 32
            };
            let size = 64 << (next() % 11);
            let size = size + next() % size;
            Buffer::new(format!("s{i}"), size, start, start + len)
        })
        .collect();
    Problem::from_buffers(buffers).expect("a valid synthetic problem")
}

/// Reads a benchmark file, `None` when it is absent.
fn read_csv(path: &Path) -> Option<Problem> {
    let text = std::fs::read_to_string(path).ok()?;
    memplan::io::csv::read_problem(&text, &path.display().to_string()).ok()
}

fn bench_planners(c: &mut Criterion) {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/benchmarks");
    let mut instances = vec![("synthetic-4000".to_string(), synthetic(4000))];
    for (name, file) in [
        ("minimalloc-A", "minimalloc/challenging/A.1048576.csv"),
        ("idealloc-S_1", "idealloc/iopddl/S_1.csv"),
    ] {
        match read_csv(&shared.join(file)) {
            Some(problem) => instances.push((name.to_string(), problem)),
            None => eprintln!("skipping {name}: ../shared not found"),
        }
    }
    for (instance, problem) in &instances {
        let mut group = c.benchmark_group(instance.as_str());
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(2));
        for p in planner::all().iter().filter(|p| p.name() != "search") {
            group.bench_with_input(
                BenchmarkId::from_parameter(p.name()),
                problem,
                |b, problem| b.iter(|| p.plan(problem).expect("a plan")),
            );
        }
        group.finish();
    }
}

fn bench_search(c: &mut Criterion) {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/benchmarks");
    let search = planner::Search {
        time_limit: Duration::from_secs(1),
        ..planner::Search::default()
    };
    let mut group = c.benchmark_group("search-challenging");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_secs(2));
    for name in ["A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K"] {
        let file = format!("minimalloc/challenging/{name}.1048576.csv");
        let Some(problem) = read_csv(&shared.join(file)) else {
            eprintln!("skipping search-challenging: ../shared not found");
            return;
        };
        group.bench_with_input(BenchmarkId::from_parameter(name), &problem, |b, problem| {
            b.iter(|| search.plan(problem).expect("a plan"))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_planners, bench_search);
criterion_main!(benches);
