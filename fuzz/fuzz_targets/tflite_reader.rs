//! Arbitrary bytes through the `.tflite` reader, TFLM's arena problem (lifetimes, scratch
//! buffers, sharing), `tflm-greedy`, the checker, the offline-plan writer and the reader
//! again; see `memplan_tflite::fuzzing::tflite_reader`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| memplan_tflite::fuzzing::tflite_reader(data));
