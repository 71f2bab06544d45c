//! Arbitrary bytes through the minimalloc CSV reader, the writers, the planners and the
//! checker; see `memplan::fuzzing::csv_reader`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| memplan::fuzzing::csv_reader(data));
