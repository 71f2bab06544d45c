//! Arbitrary bytes through the ONNX importer (protobuf decoding, shape inference, constant
//! folding, graph building); see `memplan_onnx::fuzzing::onnx_reader`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| memplan_onnx::fuzzing::onnx_reader(data));
