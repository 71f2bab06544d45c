//! Arbitrary bytes through the PyTorch trace reader (`memplan-torch-trace` JSON), its
//! training step for copies, compression and recomputation, and the swap planner with
//! its independent check; see `memplan_swap::fuzzing::torch_trace`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| memplan_swap::fuzzing::torch_trace(data));
