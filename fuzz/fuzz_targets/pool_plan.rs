//! Arbitrary text through the pool plan JSON reader, its validation and the runtime pool
//! it builds; see `memplan_pool::fuzzing::pool_plan`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    memplan_pool::fuzzing::pool_plan(data);
});
