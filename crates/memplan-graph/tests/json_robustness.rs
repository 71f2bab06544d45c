//! The graph JSON reader and the analysis never panic: mutated files either read and
//! analyse, or fail with an error naming the file.

use memplan_graph::{analyse, read_graph_json, write_graph_json, Options, Order};
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
        match read_graph_json(&text, "m.json") {
            Ok(graph) => {
                for order in [Order::File, Order::Topological] {
                    for options in [Options::NONE, Options::default()] {
                        let _ = analyse(&graph, order, options);
                    }
                }
                prop_assert_eq!(read_graph_json(&write_graph_json(&graph), "w").unwrap(), graph);
            }
            Err(e) => prop_assert!(e.to_string().starts_with("m.json: ")),
        }
    }

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,200}") {
        let _ = read_graph_json(&text, "a.json");
    }
}
