//! Helpers shared by the integration tests: the benchmark files of `../shared`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use memplan::Problem;

/// `../shared/benchmarks` beside the project root.
pub const SHARED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/benchmarks");

/// The benchmark folder, or `None` with a note on stderr when `../shared` is absent (the
/// crate must test on a user's machine too).
pub fn shared_benchmarks() -> Option<PathBuf> {
    let dir = Path::new(SHARED);
    if dir.is_dir() {
        Some(dir.to_path_buf())
    } else {
        eprintln!("skipping: ../shared not found ({})", dir.display());
        None
    }
}

/// `n` buffers drawn from a small LCG seeded with `seed`: each starts below `horizon`,
/// lives 1 to `max_length` steps and has 1 to `max_size` bytes (drawn in that order).
pub fn lcg_problem(seed: u64, n: usize, horizon: u64, max_length: u64, max_size: u64) -> Problem {
    let mut state = seed;
    let mut next = |modulo: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % modulo
    };
    let buffers = (0..n)
        .map(|i| {
            let start = next(horizon);
            let length = 1 + next(max_length);
            memplan::Buffer::new(format!("b{i}"), 1 + next(max_size), start, start + length)
        })
        .collect();
    Problem::from_buffers(buffers).unwrap()
}

/// Reads a benchmark file with memplan's own CSV reader.
pub fn read_benchmark(path: &Path) -> Problem {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    memplan::io::csv::read_problem(&text, &path.display().to_string())
        .unwrap_or_else(|e| panic!("{e}"))
}

/// (file, buffers, max-live bound, sum of sizes), from the READMEs next to the files.
pub const BENCHMARKS: &[(&str, usize, u64, u64)] = &[
    (
        "minimalloc/challenging/A.1048576.csv",
        154,
        1048576,
        15071232,
    ),
    (
        "minimalloc/challenging/B.1048576.csv",
        170,
        1048576,
        17871872,
    ),
    (
        "minimalloc/challenging/C.1048576.csv",
        203,
        1039360,
        21476352,
    ),
    ("minimalloc/challenging/D.1048576.csv", 213, 986112, 7328768),
    (
        "minimalloc/challenging/E.1048576.csv",
        215,
        1048576,
        25556992,
    ),
    (
        "minimalloc/challenging/F.1048576.csv",
        296,
        1048576,
        20930560,
    ),
    (
        "minimalloc/challenging/G.1048576.csv",
        308,
        1048576,
        20795392,
    ),
    (
        "minimalloc/challenging/H.1048576.csv",
        316,
        1048576,
        20830208,
    ),
    (
        "minimalloc/challenging/I.1048576.csv",
        374,
        1048576,
        48854016,
    ),
    (
        "minimalloc/challenging/J.1048576.csv",
        409,
        989184,
        13794304,
    ),
    (
        "minimalloc/challenging/K.1048576.csv",
        454,
        1048576,
        79005696,
    ),
    ("minimalloc/examples/input.12.csv", 5, 12, 20),
    ("idealloc/iopddl/G_1.csv", 816, 3030937746, 6060429057),
    (
        "idealloc/somas_tensors/resnet50.csv",
        1042,
        1515472556,
        3424204028,
    ),
    (
        "idealloc/somas_tensors/pangu_2.6B.csv",
        18692,
        5530099775,
        276636552888,
    ),
    ("idealloc/iopddl/S_1.csv", 28526, 1498635932, 20515359620),
    (
        "idealloc/iopddl/Y_1.csv",
        62185,
        497261190115,
        3315501617562,
    ),
];
