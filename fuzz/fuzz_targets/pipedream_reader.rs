//! Arbitrary bytes through the PipeDream `graph.txt` reader, the training-step builder, the
//! timing analysis, the no-swap baseline, graph JSON, best-of and the checker; see
//! `memplan_swap::fuzzing::pipedream_reader`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| memplan_swap::fuzzing::pipedream_reader(data));
