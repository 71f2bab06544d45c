//! Arbitrary bytes through the allocation-trace readers (CSV and replay `.bin`), the pool
//! plan trainer and the in-process pool's server; see `memplan_pool::fuzzing::traces`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    memplan_pool::fuzzing::traces(data);
});
