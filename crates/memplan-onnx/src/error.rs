//! Typed import errors. Every message names the file, node, operator, input or dim at fault
//! and, where one exists, what would fix it.

use std::sync::Arc;

use memplan_graph::GraphError;

/// Why an ONNX file could not be imported. `source_name` is the file (or the name given to
/// [`crate::import_bytes`]); it is shared, not copied, between errors.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    #[error("{path}: cannot read the file: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The file could not be read (missing, unreadable, too large, or refused at once).
    #[error(transparent)]
    File(Box<memplan::io::file::FileError>),
    #[error("{source_name}: not a valid ONNX model (protobuf decoding failed: {message}); the file may be truncated or not an .onnx file")]
    Decode {
        source_name: Arc<str>,
        message: String,
    },
    #[error("{source_name}: the model has no graph (ModelProto.graph is missing); the file may be truncated or not an .onnx file")]
    NoGraph { source_name: String },
    #[error("{source_name}: value '{value}': {message}")]
    Value {
        source_name: Arc<str>,
        value: String,
        message: String,
    },
    #[error("{source_name}: graph input '{input}', dim {dim}{param}: the size is not a number; give it with --input-shape {input}=<dims separated by x>{hint}")]
    SymbolicDim {
        source_name: Arc<str>,
        input: String,
        dim: usize,
        /// `" ('batch')"` for a named dim, else empty.
        param: String,
        /// `" or --dim batch=<n>"` for a named dim, else empty.
        hint: String,
    },
    #[error("{source_name}: graph input '{input}' has no tensor shape in the file; give it with --input-shape {input}=<dims separated by x>")]
    InputWithoutShape {
        source_name: Arc<str>,
        input: String,
    },
    #[error("{source_name}: --{option} names '{name}', which {what}")]
    UnusedOverride {
        source_name: Arc<str>,
        option: &'static str,
        name: String,
        what: String,
    },
    #[error("{source_name}: node '{node}' ({op}): input {slot} '{value}' is not a graph input, an initialiser or any node's output")]
    DanglingInput {
        source_name: Arc<str>,
        node: String,
        op: String,
        slot: usize,
        value: String,
    },
    #[error("{source_name}: node '{node}' ({op}): output '{value}' is already {what}; every value must be defined once")]
    Redefined {
        source_name: Arc<str>,
        node: String,
        op: String,
        value: String,
        what: String,
    },
    #[error("{source_name}: graph output '{value}' is not a graph input, an initialiser or any node's output")]
    DanglingOutput {
        source_name: Arc<str>,
        value: String,
    },
    #[error("{source_name}: the nodes form a cycle ({cycle}); an ONNX graph must be acyclic")]
    Cycle {
        source_name: Arc<str>,
        cycle: String,
    },
    #[error("{source_name}: node '{node}': operator '{op}'{domain} is not supported by memplan's shape inference (doc/onnx.md lists the supported operators); {why}")]
    UnknownOperator {
        source_name: Arc<str>,
        node: String,
        op: String,
        /// `" in domain 'x'"` for a non-default domain, else empty.
        domain: String,
        why: String,
    },
    #[error("{source_name}: node '{node}' ({op}): {message}")]
    Infer {
        source_name: Arc<str>,
        node: String,
        op: String,
        message: String,
    },
    #[error("{source_name}: inlining local functions: {message}")]
    Function {
        source_name: Arc<str>,
        message: String,
    },
    #[error("{source_name}: building the graph failed: {source}")]
    Graph {
        source_name: Arc<str>,
        #[source]
        source: GraphError,
    },
}
