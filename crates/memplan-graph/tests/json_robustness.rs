//! Smoke run of the `graph_json` fuzz logic: mutated graph files and arbitrary text either
//! read, round-trip, analyse and plan validly, or fail with an error naming the file.

use memplan_graph::fuzzing::graph_json;
use proptest::prelude::*;

const SEED: &str = include_str!("data/small_cnn.json");

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn mutated_graphs_never_panic(
        edits in prop::collection::vec((any::<usize>(), prop::sample::select(vec!["", "0", "-1", "\"", "[", "}", ",", "x", "99999999999999999999", "\"kind\": \"weight\",", "\"relu1_out\""])), 1..4),
    ) {
        let mut text = SEED.to_string();
        for (at, insert) in edits {
            let mut at = at % (text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            let end = (at + 1).min(text.len());
            text.replace_range(at..end, insert);
        }
        graph_json(text.as_bytes());
    }

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,200}") {
        graph_json(text.as_bytes());
    }
}

/// [`memplan_graph::fuzzing::platform_json`] on the shipped platforms, every truncation of
/// them and many byte changes, and hand-picked odd platforms.
#[test]
fn platform_json_seeds_and_mutations() {
    use memplan_graph::fuzzing::platform_json;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../platforms");
    let mut seeds: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    seeds.sort();
    assert!(!seeds.is_empty());
    for path in seeds {
        let bytes = std::fs::read(&path).unwrap();
        platform_json(&bytes);
        for cut in (0..bytes.len()).step_by(7) {
            platform_json(&bytes[..cut]);
        }
        for (i, replacement) in
            (0..bytes.len()).zip([b'0', b'-', b',', b'"', b'9', b']'].iter().cycle())
        {
            let mut changed = bytes.clone();
            changed[i] = *replacement;
            platform_json(&changed);
        }
    }
    for odd in [
        r#"{"name": "x", "accelerated": ["Add", "Conv"], "in_place": ["Add"], "alignment": 4096}"#,
        r#"{"name": "x", "accelerated": [], "in_place": [], "alignment": 0}"#,
        r#"{"name": "x", "accelerated": [], "in_place": [], "alignment": 18446744073709551615}"#,
        r#"{"name": "x", "accelerator_buffers": "dedicated", "accelerated": ["Relu", "Sigmoid"]}"#,
    ] {
        platform_json(odd.as_bytes());
    }
}
