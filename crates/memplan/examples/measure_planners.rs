//! Measures every planner on minimalloc/idealloc CSV files: arena / max-live bound and time.
//!
//! ```text
//! cargo run --release -p memplan --example measure_planners -- [--check] [--planner NAME]... [FILE.csv ...]
//! ```
//!
//! Without files, it measures the 17 benchmark files of `../shared/benchmarks` (the 12
//! minimalloc ones and the 5 idealloc ones). `--check` runs every plan through
//! `memplan::checker::check` (slow on the large files while `check` is the naive one).
//! Prints a Markdown table: one row per file, `arena/bound  time` per planner.

use std::path::{Path, PathBuf};
use std::time::Instant;

use memplan::{bound, checker, planner, Buffer, Problem};

/// A tiny reader for the `id,lower,upper,size` CSV of the benchmarks (header then rows).
fn read_csv(path: &Path) -> Problem {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .next()
        .expect("header")
        .split(',')
        .map(str::trim)
        .collect();
    let column = |name: &str| header.iter().position(|h| *h == name).expect(name);
    let (id, lower, upper, size) = (
        column("id"),
        column("lower"),
        column("upper"),
        column("size"),
    );
    let buffers = lines
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            let number = |i: usize| fields[i].parse::<u64>().expect("a number");
            Buffer::new(fields[id], number(size), number(lower), number(upper))
        })
        .collect();
    Problem::from_buffers(buffers).expect("a valid problem")
}

fn default_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/benchmarks");
    let mut files = Vec::new();
    for dir in [
        "minimalloc/examples",
        "minimalloc/challenging",
        "idealloc/iopddl",
        "idealloc/somas_tensors",
    ] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "csv"))
            .collect();
        found.sort();
        files.extend(found);
    }
    files
}

fn main() {
    let mut check = false;
    let mut files = Vec::new();
    let mut only: Vec<String> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--check" {
            check = true;
        } else if arg == "--planner" {
            only.push(args.next().expect("--planner NAME"));
        } else {
            files.push(PathBuf::from(arg));
        }
    }
    if files.is_empty() {
        files = default_files();
    }
    if files.is_empty() {
        eprintln!("no files given and ../shared/benchmarks not found");
        std::process::exit(1);
    }
    let planners: Vec<_> = planner::all()
        .iter()
        .filter(|p| p.name() != "naive")
        .filter(|p| only.is_empty() || only.iter().any(|o| o == p.name()))
        .collect();
    print!("| file | n | max-live |");
    for p in &planners {
        print!(" {} |", p.name());
    }
    println!();
    print!("|---|---:|---:|");
    for _ in &planners {
        print!("---:|");
    }
    println!();
    for file in &files {
        let problem = read_csv(file);
        let lower = bound::max_live(&problem).expect("bound fits");
        let name = file
            .strip_prefix(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/benchmarks"))
            .unwrap_or(file);
        print!("| {} | {} | {} |", name.display(), problem.len(), lower);
        for p in &planners {
            let started = Instant::now();
            let plan = p.plan(&problem).expect("a plan");
            let elapsed = started.elapsed();
            if check {
                let report = checker::check(&problem, &plan);
                assert!(
                    report.is_valid(),
                    "{} on {}: {:?}",
                    p.name(),
                    file.display(),
                    &report.violations[..1]
                );
            }
            let arena = plan.arena_bytes.expect("claimed");
            print!(
                " {:.4} {:.3}s |",
                arena as f64 / lower as f64,
                elapsed.as_secs_f64()
            );
        }
        if planners.iter().any(|p| p.name() == "best-of") {
            let (_, winner) = planner::BestOf.plan_with_winner(&problem).expect("a plan");
            print!(" winner: {winner}");
        }
        println!();
    }
}
