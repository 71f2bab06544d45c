//! The `swap` method of memplan: swap and compression by graph rewriting (see `doc/swap.md`).
//!
//! What exists so far, in pipeline order:
//! - [`pipedream`]: reads a PipeDream `graph.txt` profile and builds one training step
//!   (forward, then backward in reverse) as a [`memplan_graph::Graph`] with latencies;
//! - [`timing`]: the timing analysis of the method (TAT, TRT and TTS per node input);
//! - [`select`]: the method's choice of tensors (thTTS, thS, N);
//! - [`rewrite`]: reduction and restore nodes with serialization and prefetch edges
//!   (copies, fp16/fp24/int8 compression, or delete and recompute);
//! - [`simulate`]: the no-swap baseline, and the simulator (compute stream, two copy
//!   engines, memory timed by the copies, pinned host pool, memory profile);
//! - [`planner`]: the method (with our improvements), the TF-LMS-like level rule and
//!   swap-everything, searched against a memory budget or a step-time overhead;
//! - [`dot`]: Graphviz DOT export;
//! - [`training`]: one training step from a forward graph (an imported ONNX model), with
//!   roofline latencies;
//! - [`torch`]: one training step traced in PyTorch (`memplan.torch.trace`), and the
//!   plan `memplan.torch.apply` executes.

pub mod dot;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod pipedream;
pub mod planner;
pub mod rewrite;
pub mod select;
pub mod simulate;
pub mod timing;
pub mod torch;
pub mod training;

/// Profiles shared by the unit tests.
#[cfg(test)]
pub(crate) mod testdata {
    /// Input -> Conv -> ReLU(inplace) -> Linear, written out of order (node2 first).
    pub const TINY: &str = "\
node2 -- Conv2d(3, 8) -- forward_compute_time=2.000, backward_compute_time=4.000, activation_size=100.000, parameter_size=8.000
node1 -- Input -- forward_compute_time=500.000, backward_compute_time=0.000, activation_size=50.000, parameter_size=0.000
node3 -- ReLU(inplace) -- forward_compute_time=1.000, backward_compute_time=1.000, activation_size=100.000, parameter_size=0.000
node4 -- Linear(8, 2) -- forward_compute_time=3.000, backward_compute_time=6.000, activation_size=10.000, parameter_size=16.000
\tnode1 -- node2
\tnode2 -- node3
\tnode3 -- node4
";
}
