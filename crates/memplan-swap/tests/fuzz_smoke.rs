//! The fuzz target's logic ([`memplan_swap::fuzzing::pipedream_reader`]) on a few
//! thousand deterministic inputs: every file of `tests/data` (the fuzz seeds), their
//! truncations, byte mutations and line-level mutations (lines dropped, duplicated,
//! swapped; numbers and in-place marks changed). The real fuzzing runs in `fuzz/`; this
//! keeps its invariants checked in every `cargo test`.

use std::path::Path;

use memplan::fuzzing::Rng;
use memplan_swap::fuzzing::pipedream_reader;
use memplan_swap::pipedream::{parse, training_step};

/// The seed files, by name.
fn seeds() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".graph.txt"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    files.sort();
    assert!(
        files.len() >= 5,
        "the seeds are missing from {}",
        dir.display()
    );
    files
}

/// `line` with the value of `key=` (up to the next `,` or the end) replaced by `value`.
fn set_field(line: &str, key: &str, value: &str) -> String {
    let Some(at) = line.find(&format!("{key}=")) else {
        return line.to_string();
    };
    let start = at + key.len() + 1;
    let end = line[start..].find(',').map_or(line.len(), |k| start + k);
    format!("{}{value}{}", &line[..start], &line[end..])
}

#[test]
fn every_seed_builds_a_training_step() {
    for (name, bytes) in seeds() {
        let text = String::from_utf8(bytes.clone()).unwrap();
        let profile = parse(&text, &name).unwrap_or_else(|e| panic!("{e}"));
        training_step(&profile).unwrap_or_else(|e| panic!("{e}"));
        pipedream_reader(&bytes);
    }
}

#[test]
fn truncations_and_byte_mutations() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for (_, seed) in seeds() {
        for cut in (0..seed.len()).step_by(7) {
            pipedream_reader(&seed[..cut]);
        }
        for _ in 0..300 {
            let mut b = seed.clone();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(b.len());
                match rng.below(4) {
                    0 => b[at] ^= 1 << rng.below(8),
                    1 => b[at] = b"\t\n-=,.;[]0123456789e"[rng.below(20)],
                    2 => b.insert(at, rng.next_u64() as u8),
                    _ => {
                        b.remove(at);
                    }
                }
            }
            pipedream_reader(&b);
        }
    }
}

#[test]
fn line_mutations_reach_the_training_step() {
    let mut rng = Rng(11);
    let mut built = 0;
    let mut total = 0;
    for (_, seed) in seeds() {
        let text = String::from_utf8(seed).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for _ in 0..300 {
            let mut l: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
            for _ in 0..1 + rng.below(3) {
                let i = rng.below(l.len());
                let j = rng.below(l.len());
                match rng.below(7) {
                    0 => {
                        l.remove(i);
                    }
                    1 => {
                        let dup = l[i].clone();
                        l.insert(j, dup);
                    }
                    2 => l.swap(i, j),
                    // An edge between two random layers (maybe a cycle or a self-loop).
                    3 => l.push(format!(
                        "\tnode{} -- node{}",
                        1 + rng.below(40),
                        1 + rng.below(40)
                    )),
                    4 => {
                        l[i] = l[i]
                            .replace("ReLU(", "ReLU(inplace")
                            .replace("(inplace)", "")
                    }
                    5 => l[i] = l[i].replace("Conv2d(", "ReLU(inplace)("),
                    _ => {
                        let keys = ["forward_compute_time", "activation_size", "parameter_size"];
                        let values = [
                            "0.0",
                            "1e300",
                            "9007199254740992.0",
                            "1.5",
                            "-0",
                            "[1.0; 2.0]",
                        ];
                        let key = keys[rng.below(keys.len())];
                        let value = values[rng.below(values.len())];
                        l[i] = set_field(&l[i], key, value);
                    }
                }
            }
            let mutated = l.join("\n");
            total += 1;
            if parse(&mutated, "m").is_ok_and(|p| training_step(&p).is_ok()) {
                built += 1;
            }
            pipedream_reader(mutated.as_bytes());
        }
    }
    // The mutations must reach past the reader's errors often enough.
    eprintln!("{built} of {total} mutated profiles built a training step");
    assert!(built * 5 > total, "only {built} of {total} built a step");
}

/// The inputs the fuzzer crashed on, kept as its seeds in `fuzz/seeds/pipedream_reader`
/// (not UTF-8 throughout, so not among `tests/data`'s): `latency_round_trip.txt` gave a
/// backward node a latency of 2.2222222222222222e101 ms, which graph JSON read back as
/// 2.2222222222222226e101 until the reader rounded decimals correctly.
#[test]
fn the_fuzzers_finds_stay_fixed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/pipedream_reader");
    let mut found = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        pipedream_reader(&std::fs::read(entry.unwrap().path()).unwrap());
        found += 1;
    }
    assert!(found >= 1, "no inputs in {}", dir.display());
}

/// The inputs the `torch_trace` fuzzer crashed on, kept as its seeds in
/// `fuzz/seeds/torch_trace`: `producer-not-in-outputs.json` has an op whose `outputs` key
/// is misspelt, so a storage named that op as its producer while the op listed no
/// outputs; the planner then made a plan its own check refused ("op 0 waits for the
/// reduction of storage 2, produced by op 0"). The reader now refuses such a trace.
#[test]
fn the_torch_fuzzers_finds_stay_fixed() {
    use memplan_swap::fuzzing::torch_trace;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/torch_trace");
    let mut found = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        torch_trace(&std::fs::read(entry.unwrap().path()).unwrap());
        found += 1;
    }
    assert!(found >= 1, "no inputs in {}", dir.display());
}

/// The `torch_trace` fuzz target's logic ([`memplan_swap::fuzzing::torch_trace`]) on the
/// PyTorch trace fixtures (`tests/data/torch`), their truncations, byte mutations and
/// number changes (ids, op indices, byte counts made out of range or swapped).
#[test]
fn torch_traces_truncated_and_mutated() {
    use memplan_swap::fuzzing::torch_trace;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/torch");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(
        files.len() >= 3,
        "the torch fixtures are missing from {}",
        dir.display()
    );
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for path in files {
        let seed = std::fs::read(&path).unwrap();
        torch_trace(&seed);
        let step = (seed.len() / 60).max(1);
        for cut in (0..seed.len()).step_by(step) {
            torch_trace(&seed[..cut]);
        }
        // Digits changed: ids, op indices and sizes out of range, or pointing elsewhere.
        let digits: Vec<usize> = (0..seed.len())
            .filter(|&i| seed[i].is_ascii_digit())
            .collect();
        for _ in 0..120 {
            let mut bytes = seed.clone();
            for _ in 0..1 + rng.below(3) {
                let at = digits[rng.below(digits.len())];
                bytes[at] = b"0123456789"[rng.below(10)];
            }
            torch_trace(&bytes);
        }
        for _ in 0..40 {
            let mut bytes = seed.clone();
            let at = rng.below(bytes.len());
            bytes[at] = rng.below(256) as u8;
            torch_trace(&bytes);
        }
    }
}
