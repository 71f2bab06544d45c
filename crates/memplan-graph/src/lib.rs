//! memplan-graph: the dataflow graph of a model and its translation into a memplan
//! [`memplan::Problem`].
//!
//! A [`Graph`] holds nodes (operators) and values (tensors). A value is a hyperedge: one
//! producer output feeding any number of consumer inputs. Front-ends (ONNX, our JSON graph
//! format, training profiles) build a `Graph`; analyses turn it into buffers with lifetimes.
//! This crate depends on `memplan` and never the reverse.
//!
//! - [`ir`]: the graph ([`Graph`], [`Node`], [`Value`]);
//! - [`order`]: the execution order ([`execution_order`], [`Order`]);
//! - [`analysis`]: lifetimes, aliasing, in-place reuse and the [`memplan::Problem`]
//!   ([`analyse`]);
//! - [`exclusive`]: the exclusivity of operators' blocks (the `exclusive` method) and the problem
//!   the `exclusive` planner plans ([`exclusive_problem`]);
//! - [`npu`]: the platform description, operator configuration and groups of the
//!   `npu` method, planned by [`plan_npu`];
//! - [`json`]: memplan's graph JSON ([`read_graph_json`], [`write_graph_json`]).
//!
//! ```
//! use memplan_graph::{analyse, read_graph_json, Options, Order};
//! let text = r#"{"inputs": ["x"], "outputs": ["y"],
//!   "values": [{"name": "x", "dtype": "FLOAT", "shape": [1, 4]},
//!              {"name": "h", "dtype": "FLOAT", "shape": [1, 4]},
//!              {"name": "r", "dtype": "FLOAT", "shape": [1, 4]},
//!              {"name": "y", "dtype": "FLOAT", "shape": [1, 4]}],
//!   "nodes": [{"op": "Exp", "inputs": ["x"], "outputs": ["h"]},
//!             {"op": "Relu", "inputs": ["h"], "outputs": ["r"]},
//!             {"op": "Exp", "inputs": ["r"], "outputs": ["y"]}]}"#;
//! let graph = read_graph_json(text, "tiny.json").unwrap();
//! let plain = analyse(&graph, Order::File, Options::NONE).unwrap();
//! assert_eq!(plain.problem.len(), 4);
//! // r is written over h (h dies at Relu); x and y, graph input and output, are never
//! // written over.
//! let shared = analyse(&graph, Order::File, Options::default()).unwrap();
//! assert_eq!(shared.problem.len(), 3);
//! assert_eq!(shared.stats.inplace_saved_bytes, 16);
//! ```

pub mod analysis;
pub mod exclusive;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod ir;
pub mod json;
pub mod npu;
pub mod order;

pub use analysis::{
    analyse, analyse_every_order, analyse_with_inplace_ops, Analysis, AnalysisError, Options, Role,
    Stats, ValueInfo,
};
pub use exclusive::{
    all_orders_problem, block_operators, dataflow, exclusive_problem, exclusivity, tensor_dataflow,
    AllOrdersError, Exclusivity, Reason, Rules,
};
pub use ir::{
    Attribute, DType, Graph, GraphError, Node, NodeId, Tensor, TensorData, Value, ValueId,
    ValueKind,
};
pub use json::{read_graph_json, write_graph_json, JsonGraphError};
pub use npu::{
    analyse_for, npu_groups, npu_input, operator_configs, plan_npu, AcceleratorBuffers, NpuError,
    NpuInput, NpuPlan, OpGroup, OperatorConfig, Platform, PlatformError, WeightLifetime,
};
pub use order::{execution_order, Order, OrderError};
