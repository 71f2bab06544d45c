//! The `traces` fuzz target's logic ([`memplan_pool::fuzzing::traces`]) on deterministic
//! inputs: the seed corpus of `fuzz/seeds/traces` (hostile cases included), seeded
//! mutations of it, and random bytes and CSV-like text from proptest with a fixed seed. The
//! real fuzzing runs in `fuzz/`; this keeps its invariants checked in every `cargo test`.

use std::path::Path;

use memplan::fuzzing::Rng;
use memplan_pool::fuzzing::traces;
use memplan_pool::{ForeignFrees, ReadOptions, Trace};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

/// The seed corpus (sorted, so the mutations below are reproducible). Each file's first
/// byte picks the format (even: CSV, odd: bin), as the target reads it.
fn seeds() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/traces");
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn seed_corpus() {
    let files = seeds();
    assert!(files.len() >= 10, "the seed corpus is missing");
    let mut served = 0;
    for (name, bytes) in &files {
        let reached = traces(bytes);
        eprintln!("{name}: {reached:?}");
        served += reached.served;
    }
    assert!(served > 0, "no seed reaches the in-process pool's serving");
}

/// The hostile seeds are refused (with foreign frees an error) and the good ones read: a
/// target whose readers accepted everything, or nothing, would check little.
#[test]
fn seed_corpus_has_both_outcomes() {
    for (name, bytes) in seeds() {
        let (selector, body) = bytes.split_first().unwrap();
        let path = Path::new(&name);
        let read = if selector % 2 == 1 {
            Trace::from_bin_with(path, body, ReadOptions::default())
        } else {
            Trace::from_csv_with(path, &String::from_utf8_lossy(body), ForeignFrees::Error)
        };
        let good = matches!(
            name.as_str(),
            "periodic.csv"
                | "periodic.bin"
                | "cross_iteration.csv"
                | "bom_extra_columns.csv"
                | "huge_sizes.csv"
        );
        assert_eq!(read.is_ok(), good, "{name}: {read:?}");
    }
}

/// A periodic trace is served from the pool: the target reaches its serving checks.
#[test]
fn a_periodic_trace_reaches_serving() {
    let mut text = String::from("iter,op,size,id\n");
    for it in 0..6 {
        let b = it * 10;
        for line in [
            format!("{it},alloc,4096,{b}"),
            format!("{it},alloc,70000,{}", b + 1),
            format!("{it},free,4096,{b}"),
            format!("{it},free,70000,{}", b + 1),
        ] {
            text.push_str(&line);
            text.push('\n');
        }
    }
    let mut input = vec![0u8];
    input.extend_from_slice(text.as_bytes());
    let reached = traces(&input);
    assert_eq!(reached.traces, 2, "{reached:?}");
    assert!(reached.plans >= 6 * 3 * 2, "{reached:?}");
    assert!(reached.served > 0, "{reached:?}");
}

const TOKENS: &[&str] = &[
    ",",
    "\n",
    "\r\n",
    " ",
    "-1",
    "0",
    "1",
    "3",
    "64",
    "4096",
    "18446744073709551615",
    "18446744073709551616",
    "alloc",
    "free",
    "iter",
    "op",
    "size",
    "id",
    "align",
    "seq",
    "\u{feff}",
];

fn mutate(input: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut data = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        // Keep the format selector in place.
        let at = 1 + rng.below(data.len());
        match rng.below(6) {
            0 if data.len() > 1 => {
                let i = 1 + rng.below(data.len() - 1);
                data[i] = rng.next_u64() as u8;
            }
            1 | 2 => {
                let token = TOKENS[rng.below(TOKENS.len())].as_bytes();
                let at = at.min(data.len());
                data.splice(at..at, token.iter().copied());
            }
            3 => {
                let at = at.min(data.len());
                let end = (at + 1 + rng.below(16)).min(data.len());
                data.drain(at..end);
            }
            4 => {
                // Duplicate a line (a second alloc or free of one id).
                let lines: Vec<Vec<u8>> = data[1..]
                    .split(|&b| b == b'\n')
                    .map(<[u8]>::to_vec)
                    .collect();
                let mut copy = lines[rng.below(lines.len())].clone();
                copy.push(b'\n');
                let at = at.min(data.len());
                data.splice(at..at, copy);
            }
            _ => data.truncate(at.max(1)),
        }
    }
    data
}

#[test]
fn seeded_mutations_of_the_seeds() {
    let files = seeds();
    let mut rng = Rng(0x7472_6163_6573_2121);
    let (mut read, mut plans) = (0, 0);
    for round in 0..3000 {
        let (_, base) = &files[round % files.len()];
        let reached = traces(&mutate(base, &mut rng));
        read += reached.traces;
        plans += reached.plans;
    }
    // Mutations that still read are what exercise the trainer and the server.
    assert!(
        read >= 200 && plans >= 1000,
        "only {read} traces read, {plans} plans"
    );
}

fn fixed_seed(cases: u32) -> Config {
    Config {
        cases,
        rng_seed: RngSeed::Fixed(20261124),
        failure_persistence: None,
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(fixed_seed(500))]

    #[test]
    fn random_bytes(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        traces(&data);
    }

    #[test]
    fn random_csv_like_text(
        body in "(alloc|free|[0-9]{1,5}|,|\n){0,80}",
    ) {
        let mut input = vec![0u8];
        input.extend_from_slice(b"iter,op,size,id\n");
        input.extend_from_slice(body.as_bytes());
        traces(&input);
    }
}

/// The `pool_plan` fuzz target's logic on its seed corpus (`fuzz/seeds/pool_plan`) and
/// seeded mutations of it: trained plans (packed and not) are read, validated and served
/// from; the 64 GiB plan is valid but not served here.
#[test]
fn pool_plan_seeds_and_mutations() {
    use memplan_pool::fuzzing::pool_plan;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/pool_plan");
    let mut files: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| std::fs::read(entry.unwrap().path()).unwrap())
        .collect();
    files.sort();
    assert!(files.len() >= 3, "the pool_plan seed corpus is missing");
    let mut served = 0;
    let mut valid = 0;
    for bytes in &files {
        let reached = pool_plan(bytes);
        assert!(reached.read, "{}", String::from_utf8_lossy(bytes));
        valid += u32::from(reached.valid);
        served += reached.served;
    }
    assert!(valid >= 3 && served > 0, "valid {valid}, served {served}");
    let mut rng = Rng(45);
    for _ in 0..2_000 {
        let seed = &files[rng.below(files.len())];
        pool_plan(&mutate(seed, &mut rng));
    }
}
