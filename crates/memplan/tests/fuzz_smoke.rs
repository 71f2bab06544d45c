//! The fuzz target's logic ([`memplan::fuzzing::csv_reader`]) on a few thousand
//! deterministic inputs: the fixtures (including past crashes), seeded mutations of them, and
//! random bytes and CSV-like text from proptest with a fixed seed. The real fuzzing runs in
//! `fuzz/` (see its Cargo.toml); this keeps its invariants checked in every `cargo test`.

use std::path::Path;

use memplan::fuzzing::{csv_reader, Rng, MAX_PLANNED_BUFFERS};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

/// Every file of `tests/data` (sorted, so the mutations below are reproducible).
fn fixtures() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .filter(|(name, _)| name.ends_with(".csv"))
        .collect();
    files.sort();
    files
}

#[test]
fn fixtures_and_past_crashes() {
    let files = fixtures();
    assert!(files.len() >= 5);
    for (name, bytes) in &files {
        eprintln!("{name}");
        csv_reader(bytes);
    }
}

#[test]
fn hand_picked_corner_cases() {
    let cases: &[&str] = &[
        "",
        "\u{feff}",
        "id,lower,upper,size\n",
        // Fixed offsets that clash: no valid plan exists.
        "id,lower,upper,size,offset\na,0,2,4,0\nb,1,3,4,2\n",
        // Fixed offsets at the top of the address space.
        "id,lower,upper,size,offset\na,0,2,4,18446744073709551611\nb,0,2,4,\n",
        // Sizes whose sum overflows.
        "id,lower,upper,size\na,0,2,18446744073709551615\nb,0,2,18446744073709551615\n",
        "id,lower,upper,size,alignment\na,0,2,3,9223372036854775808\nb,0,2,3,9223372036854775808\n",
        "id,lower,upper,size,gaps\na,0,10,4,2-4 6-8\nb,2,4,4,\nc,6,8,4,\n",
        "id,start,end,size,gaps,hint\n\"a\n,\",0,0,1,,-1\n",
        // Zero-size buffers: aligned, fixed inside a fixed buffer and in free space, gapped.
        "id,lower,upper,size,alignment,offset,gaps\na,0,4,8,,0,\nz,0,4,0,16,4,\nw,1,3,0,64,,\nb,0,4,8,,,\nv,0,9,0,,40,2-5\nc,2,6,16,8,,\n",
    ];
    for case in cases {
        csv_reader(case.as_bytes());
    }
    // Past the planning cap: read and round-tripped only.
    let mut big = String::from("id,lower,upper,size\n");
    for i in 0..=MAX_PLANNED_BUFFERS {
        big.push_str(&format!("b{i},{i},{},1\n", i + 3));
    }
    csv_reader(big.as_bytes());
}

const TOKENS: &[&str] = &[
    ",",
    "\n",
    "\r\n",
    "\"",
    "\"\"",
    " ",
    "-",
    "@",
    ":",
    "0",
    "1",
    "-1",
    "7",
    "4096",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "id",
    "lower",
    "upper",
    "size",
    "alignment",
    "offset",
    "hint",
    "gaps",
    "begin",
    "start",
    "end",
    "buffer",
    "buffer_id",
    "2-4",
    "0-1 3-5",
    "1-2@0:4",
    "\u{feff}",
    "\u{e9}",
];

fn mutate(input: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut data = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(data.len() + 1);
        match rng.below(7) {
            0 if !data.is_empty() => {
                let i = rng.below(data.len());
                data[i] = rng.next_u64() as u8;
            }
            1 | 2 => {
                let token = TOKENS[rng.below(TOKENS.len())].as_bytes();
                data.splice(at..at, token.iter().copied());
            }
            3 => {
                let end = (at + 1 + rng.below(8)).min(data.len());
                data.drain(at.min(end)..end);
            }
            4 => {
                // Duplicate a line (often making a duplicate id).
                let lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
                let line = lines[rng.below(lines.len())].to_vec();
                let mut copy = line.clone();
                copy.push(b'\n');
                data.splice(at..at, copy);
            }
            5 => {
                // Replace a run of digits with another number.
                if let Some(start) = (at..data.len()).find(|&i| data[i].is_ascii_digit()) {
                    let end = (start..data.len())
                        .find(|&i| !data[i].is_ascii_digit())
                        .unwrap_or(data.len());
                    let number = match rng.below(4) {
                        0 => "0".to_string(),
                        1 => u64::MAX.to_string(),
                        2 => (rng.next_u64() % 64).to_string(),
                        _ => rng.next_u64().to_string(),
                    };
                    data.splice(start..end, number.bytes());
                }
            }
            _ => data.truncate(at),
        }
    }
    data
}

#[test]
fn seeded_mutations_of_the_fixtures() {
    let files = fixtures();
    let mut rng = Rng(0x6d65_6d70_6c61_6e21);
    for round in 0..3000 {
        let (_, base) = &files[round % files.len()];
        let input = mutate(base, &mut rng);
        csv_reader(&input);
    }
}

fn fixed_seed(cases: u32) -> Config {
    Config {
        cases,
        rng_seed: RngSeed::Fixed(20240501),
        failure_persistence: None,
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(fixed_seed(1000))]

    #[test]
    fn random_bytes(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        csv_reader(&data);
    }

    #[test]
    fn random_csv_like_text(
        header in proptest::sample::subsequence(
            vec!["id", "lower", "upper", "size", "alignment", "offset", "hint", "gaps", "end"], 3..8),
        body in "([0-9]{1,3}|[a-c]|-1|,|\n|\"| |[0-9]-[0-9]{1,2}){0,60}",
    ) {
        let text = format!("{}\n{body}", header.join(","));
        csv_reader(text.as_bytes());
    }
}

/// [`memplan::fuzzing::plan_files`] on its seeds (`fuzz/seeds/plan_files`) and every
/// truncation and many byte changes of them.
#[test]
fn plan_files_seeds_and_mutations() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/plan_files");
    let mut seeds: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    seeds.sort();
    assert!(seeds.len() >= 3);
    for path in seeds {
        let bytes = std::fs::read(&path).unwrap();
        memplan::fuzzing::plan_files(&bytes);
        for cut in 0..bytes.len() {
            memplan::fuzzing::plan_files(&bytes[..cut]);
        }
        for (i, replacement) in
            (0..bytes.len()).zip([b'0', b'-', b',', b'"', b'9', b'}'].iter().cycle())
        {
            let mut changed = bytes.clone();
            changed[i] = *replacement;
            memplan::fuzzing::plan_files(&changed);
        }
    }
}
