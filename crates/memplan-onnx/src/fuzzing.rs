//! The logic behind the `onnx_reader` fuzz target in `fuzz/`, shared with the smoke test.
//!
//! [`onnx_reader`] panics only when an invariant breaks; that panic is what the fuzzer
//! reports.

use crate::{import_bytes, ImportOptions};

/// Imports arbitrary bytes as an ONNX model. The import must not panic; an error must have
/// a message; an imported graph must give every input and activation a shape whose byte
/// count is its `bytes`, and every activation a producer.
pub fn onnx_reader(data: &[u8]) {
    match import_bytes(data, "fuzz.onnx", &ImportOptions::default()) {
        Err(error) => assert!(!error.to_string().is_empty(), "empty error message"),
        Ok(graph) => {
            for v in graph.values() {
                if !v.is_activation() {
                    continue;
                }
                let shape = v.shape.as_ref().expect("every activation has a shape");
                assert_eq!(
                    memplan_graph::ir::shape_bytes(v.dtype, shape),
                    Some(v.bytes),
                    "value '{}': bytes do not match its shape",
                    v.name
                );
                if v.kind == memplan_graph::ValueKind::Activation {
                    assert!(
                        v.producer.is_some(),
                        "activation '{}' has no producer",
                        v.name
                    );
                }
            }
        }
    }
}
