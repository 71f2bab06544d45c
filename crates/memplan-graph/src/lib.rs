//! memplan-graph: the dataflow graph of a model and its translation into a memplan
//! [`memplan::Problem`].
//!
//! A [`Graph`] holds nodes (operators) and values (tensors). A value is a hyperedge: one
//! producer output feeding any number of consumer inputs. Front-ends (ONNX, our JSON graph
//! format, training profiles) build a `Graph`; analyses turn it into buffers with lifetimes.
//! This crate depends on `memplan` and never the reverse.

pub mod analysis;
pub mod ir;
pub mod json;
pub mod order;

pub use analysis::{analyse, Analysis, AnalysisError, Options, Role, Stats, ValueInfo};
pub use ir::{
    Attribute, DType, Graph, GraphError, Node, NodeId, Tensor, TensorData, Value, ValueId,
    ValueKind,
};
pub use json::{read_graph_json, write_graph_json, JsonGraphError};
pub use order::{execution_order, Order, OrderError};
