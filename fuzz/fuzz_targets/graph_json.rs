//! Arbitrary bytes through the graph JSON reader, the writer, the lifetime analysis, best-of
//! and the checker; see `memplan_graph::fuzzing::graph_json`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| memplan_graph::fuzzing::graph_json(data));
