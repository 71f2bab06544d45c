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
