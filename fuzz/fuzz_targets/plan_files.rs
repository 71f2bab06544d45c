//! Arbitrary text through the plan JSON, solution CSV and memory-operation readers and the
//! checker; see `memplan::fuzzing::plan_files`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| memplan::fuzzing::plan_files(data));
