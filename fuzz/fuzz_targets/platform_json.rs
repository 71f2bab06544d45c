//! Arbitrary text through the npu platform reader and the method; see
//! `memplan_graph::fuzzing::platform_json`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| memplan_graph::fuzzing::platform_json(data));
