//! One training step built from a forward graph (an imported ONNX model), with latencies
//! from a roofline model of FLOPs and bytes.
//!
//! # The training step
//!
//! [`training_step`] follows the conventions of [`crate::pipedream::training_step`]:
//!
//! - **Forward**: every node of the forward graph, in its file order (checked to be
//!   topological), with the same values, attributes and the roofline latency.
//! - **Gradients flow** through floating-point values only: a value *needs a gradient*
//!   when it is a floating-point activation computed (directly or not) from a trainable
//!   weight (a floating-point [`ValueKind::Weight`]). Graph inputs (the data) and
//!   constants get none; integer values (shape sub-graphs, indices) get none.
//! - **Backward**: in the reverse of the forward order, one node `<node>.bwd` (op
//!   `Backward`, attribute `forward_op` = the forward op) per forward node that has an
//!   input needing a gradient or a trainable weight *and* an output that receives a
//!   gradient. It reads the gradients of its outputs, `grad:<consumer>-><value>` (the
//!   sum over consumers is inside the node), the graph outputs among its outputs
//!   themselves (the loss seed), and the forward tensors its op needs ([`backward_reads`],
//!   the table below). It produces one gradient `grad:<node>-><input>` per distinct input
//!   that needs one, with that activation's dtype, shape and bytes.
//! - Weight gradients are not modelled (outside the activation arena, like the weights).
//!
//! ```text
//!  forward:  x ─> conv(w) ─c─> relu ─r─> gemm(W) ─y─> softmax ─s (graph output)
//!  backward: softmax.bwd reads s (seed)          -> grad:softmax->y
//!            gemm.bwd    reads grad y, r, W      -> grad:gemm->r
//!            relu.bwd    reads grad r, r         -> grad:relu->c
//!            conv.bwd    reads grad c, x, w      -> nothing: x is the data, but it runs
//!                                                   (it computes w's gradient)
//! ```
//!
//! The memory model of the result is [`memplan_graph::analyse`] with
//! [`memplan_graph::Options::NONE`] in [`memplan_graph::Order::File`], as for the PipeDream
//! steps: every value has its own buffer (no view or in-place sharing), which is what the
//! `tensors.csv` references count, so the peak is an upper bound on a framework's.
//!
//! # What a backward node reads ([`backward_reads`])
//!
//! | op | reads (besides output gradients) | why |
//! |---|---|---|
//! | Conv, ConvTranspose, MatMul, Gemm | inputs 0 and 1 | dW needs the input, dX the weight (or the other operand) |
//! | Mul, Div, Pow | inputs 0 and 1 | each gradient needs the other operand |
//! | BatchNormalization, LayerNormalization, InstanceNormalization | inputs 0 and 1 | the input (statistics) and the scale |
//! | Relu, Sigmoid, Tanh, Exp, Sqrt, Reciprocal, Softmax, LogSoftmax, Dropout | outputs | the derivative is a function of the output (Dropout: its mask) |
//! | Clip, LeakyRelu, PRelu, Elu, Selu, Gelu, Erf, HardSigmoid, HardSwish, Abs, Log, Sin, Cos | input 0 | the derivative is a function of the input |
//! | MaxPool | input 0 and outputs | where the maxima were |
//! | Gather | input 1 | the indices (embedding backward) |
//! | Where | input 0 | the condition |
//! | Add, Sub, Neg, Sum, Mean, Cast, AveragePool, GlobalAveragePool, ReduceMean, ReduceSum, Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Identity, Concat, Split, Slice, Expand, Pad, Tile | nothing | the gradient needs shapes only |
//! | any other op | every input | conservative default |
//!
//! # The roofline model ([`forward_cost`], [`Device`])
//!
//! A node's latency is `max(FLOPs / peak_flops, bytes / mem_bandwidth) + launch`, where
//! bytes = the bytes of its distinct inputs (activations, weights, constants) plus its
//! outputs. FLOPs per op (numel = element count from the value's shape):
//!
//! | op | FLOPs |
//! |---|---|
//! | Conv | 2 · numel(Y) · Cin/groups · kh · kw (= 2 · numel(Y) · numel(W) / Cout) |
//! | ConvTranspose | 2 · numel(X) · numel(W) / Cin |
//! | MatMul | 2 · numel(Y) · K (K = last dim of A), i.e. 2·M·N·K per matrix |
//! | Gemm | 2 · M · N · K (the bias add is not counted) |
//! | MaxPool, AveragePool | numel(Y) · kernel size |
//! | GlobalAveragePool, GlobalMaxPool, ReduceMean, ReduceSum, ReduceMax | numel(X) |
//! | BatchNormalization, InstanceNormalization | 4 · numel(Y) |
//! | LayerNormalization | 8 · numel(Y) |
//! | Softmax, LogSoftmax | 5 · numel(Y) |
//! | data movement (Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Identity, Concat, Split, Slice, Expand, Pad, Tile, Gather, Cast) | 0 (memory-bound: a copy, as the memory model gives the result its own buffer) |
//! | any other op (elementwise) | numel of the outputs |
//!
//! Nodes that launch no kernel take 0 ms: nodes without outputs (ONNX `Constant`, whose
//! value the importer keeps outside the graph) and `Shape`, `Size` (metadata).
//!
//! **Backward**: bytes = its distinct inputs and outputs as built, plus the trainable
//! weights' bytes (the weight gradients it writes). FLOPs = k · forward FLOPs, where k
//! is, for Conv, ConvTranspose, MatMul and Gemm, the number of operands (inputs 0 and 1)
//! that get a gradient or are trainable weights (each costs one forward), at least 1;
//! 2 for other ops with a trainable weight; 1 otherwise.
//!
//! Every FLOP and byte count is checked for overflow; a value without a shape where the
//! model needs its dims is an error naming the node and the value.

use std::collections::BTreeMap;

use memplan_graph::{
    execution_order, Attribute, Graph, GraphError, Node, NodeId, OrderError, Value, ValueId,
    ValueKind,
};

/// The accelerator of the roofline model. The default is a V100-like GPU in fp32:
/// 15.7 TFLOP/s, 900 GB/s, 5 µs per kernel launch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Device {
    /// Peak arithmetic throughput, FLOP per second.
    pub peak_flops: f64,
    /// Memory bandwidth, bytes per second.
    pub mem_bandwidth: f64,
    /// Fixed cost of one kernel, milliseconds.
    pub launch_ms: f64,
}

impl Default for Device {
    fn default() -> Device {
        Device {
            peak_flops: 15.7e12,
            mem_bandwidth: 900e9,
            launch_ms: 0.005,
        }
    }
}

/// The longest training step the roofline model accepts (a year, in milliseconds): beyond
/// it the device's parameters are nonsense and times lose all precision.
pub const MAX_STEP_MS: f64 = 3.2e10;

impl Device {
    /// Checks the parameters: throughput and bandwidth finite and > 0, launch finite and
    /// ≥ 0.
    pub fn validate(&self) -> Result<(), TrainingError> {
        let bad = |what: &str, x: f64| TrainingError::BadDevice {
            message: format!("{what} is {x}; it must be a finite number > 0"),
        };
        if !(self.peak_flops.is_finite() && self.peak_flops > 0.0) {
            return Err(bad("peak throughput (FLOP/s)", self.peak_flops));
        }
        if !(self.mem_bandwidth.is_finite() && self.mem_bandwidth > 0.0) {
            return Err(bad("memory bandwidth (B/s)", self.mem_bandwidth));
        }
        if !(self.launch_ms.is_finite() && self.launch_ms >= 0.0) {
            return Err(TrainingError::BadDevice {
                message: format!(
                    "launch overhead is {} ms; it must be a finite number >= 0",
                    self.launch_ms
                ),
            });
        }
        Ok(())
    }

    /// The roofline latency of a kernel in milliseconds:
    /// `max(flops / peak_flops, bytes / mem_bandwidth) + launch`.
    pub fn latency_ms(&self, cost: Cost) -> f64 {
        let compute = cost.flops as f64 / self.peak_flops;
        let memory = cost.bytes as f64 / self.mem_bandwidth;
        compute.max(memory) * 1e3 + self.launch_ms
    }
}

/// The work of one kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cost {
    /// Floating-point operations.
    pub flops: u64,
    /// Bytes read and written.
    pub bytes: u64,
}

/// Why a training step cannot be built, naming the node.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TrainingError {
    #[error("node '{node}': value '{value}' has no shape; the roofline model needs its dims (give the ONNX import --input-shape NAME=DIMS or --dim NAME=VALUE)")]
    NoShape { node: String, value: String },
    #[error("node '{node}': the {what} count overflows 64 bits")]
    Overflow { node: String, what: &'static str },
    #[error("node '{node}' ({op}): {message}")]
    BadOperand {
        node: String,
        op: String,
        message: String,
    },
    #[error("the forward graph has no execution order: {0}")]
    Order(#[from] OrderError),
    #[error("node '{node}': cannot build the training step: {source}")]
    Graph { node: String, source: GraphError },
    #[error("cannot copy the forward graph: {0}")]
    Copy(GraphError),
    #[error("device: {message}")]
    BadDevice { message: String },
}

/// What the backward node of an op reads from the forward pass, besides the gradients
/// of its outputs (the module documentation has the table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reads {
    /// Nothing: the gradient needs shapes only.
    Nothing,
    /// These input slots (those present).
    Inputs(&'static [usize]),
    /// Its outputs.
    Outputs,
    /// These input slots and its outputs.
    InputsAndOutputs(&'static [usize]),
    /// Every input (the conservative default).
    AllInputs,
}

/// The backward rule of an ONNX op type (table in the module documentation).
pub fn backward_reads(op_type: &str) -> Reads {
    match op_type {
        "Conv"
        | "ConvTranspose"
        | "MatMul"
        | "Gemm"
        | "Mul"
        | "Div"
        | "Pow"
        | "BatchNormalization"
        | "LayerNormalization"
        | "InstanceNormalization" => Reads::Inputs(&[0, 1]),
        "Relu" | "Sigmoid" | "Tanh" | "Exp" | "Sqrt" | "Reciprocal" | "Softmax" | "LogSoftmax"
        | "Dropout" => Reads::Outputs,
        "Clip" | "LeakyRelu" | "PRelu" | "Elu" | "Selu" | "Gelu" | "Erf" | "HardSigmoid"
        | "HardSwish" | "Abs" | "Log" | "Sin" | "Cos" => Reads::Inputs(&[0]),
        "MaxPool" => Reads::InputsAndOutputs(&[0]),
        "Gather" => Reads::Inputs(&[1]),
        "Where" => Reads::Inputs(&[0]),
        "Add" | "Sub" | "Neg" | "Sum" | "Mean" | "Cast" | "AveragePool" | "GlobalAveragePool"
        | "ReduceMean" | "ReduceSum" | "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze"
        | "Transpose" | "Identity" | "Concat" | "Split" | "Slice" | "Expand" | "Pad" | "Tile" => {
            Reads::Nothing
        }
        _ => Reads::AllInputs,
    }
}

/// True for the contractions, whose backward costs one forward per operand gradient.
fn is_contraction(op_type: &str) -> bool {
    matches!(op_type, "Conv" | "ConvTranspose" | "MatMul" | "Gemm")
}

/// True for a trained parameter: a floating-point weight.
fn is_trainable(value: &Value) -> bool {
    value.kind == ValueKind::Weight && value.dtype.is_float()
}

/// The roofline work of a forward node (tables in the module documentation), or `None`
/// for a node that launches no kernel.
pub fn forward_cost(graph: &Graph, node: NodeId) -> Result<Option<Cost>, TrainingError> {
    let n = graph.node(node);
    if n.outputs.is_empty() || matches!(n.op_type.as_str(), "Shape" | "Size") {
        return Ok(None);
    }
    let overflow = |what| TrainingError::Overflow {
        node: n.name.clone(),
        what,
    };
    let bad = |message: String| TrainingError::BadOperand {
        node: n.name.clone(),
        op: n.op_type.clone(),
        message,
    };
    let shape = |v: ValueId| -> Result<&[u64], TrainingError> {
        let value = graph.value(v);
        value
            .shape
            .as_deref()
            .ok_or_else(|| TrainingError::NoShape {
                node: n.name.clone(),
                value: value.name.clone(),
            })
    };
    let numel = |v: ValueId| -> Result<u64, TrainingError> {
        shape(v)?
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .ok_or_else(|| overflow("element"))
    };
    let input = |slot: usize| -> Result<ValueId, TrainingError> {
        n.inputs
            .get(slot)
            .copied()
            .flatten()
            .ok_or_else(|| bad(format!("input {slot} is missing")))
    };
    let product = |dims: &[u64]| {
        dims.iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .ok_or_else(|| overflow("FLOP"))
    };
    let times = |a: u64, b: u64| a.checked_mul(b).ok_or_else(|| overflow("FLOP"));
    let y = n.outputs[0];
    let flops = match n.op_type.as_str() {
        "Conv" | "ConvTranspose" => {
            let w = shape(input(1)?)?;
            if w.len() < 2 {
                return Err(bad(format!(
                    "the weight has rank {}; a convolution weight has rank >= 2",
                    w.len()
                )));
            }
            // Conv: every output element is a dot product over W's dims 1..;
            // ConvTranspose: every input element scatters over them.
            let per = product(&w[1..])?;
            let elements = if n.op_type == "Conv" {
                numel(y)?
            } else {
                numel(input(0)?)?
            };
            times(times(2, elements)?, per)?
        }
        "MatMul" | "Gemm" => {
            let a = shape(input(0)?)?;
            let k = if n.op_type == "Gemm" {
                let trans_a =
                    matches!(n.attributes.get("transA"), Some(Attribute::Int(t)) if *t != 0);
                if a.len() != 2 {
                    return Err(bad(format!("A has rank {}; Gemm needs rank 2", a.len())));
                }
                a[usize::from(!trans_a)]
            } else {
                *a.last().ok_or_else(|| bad("A is a scalar".into()))?
            };
            times(times(2, numel(y)?)?, k)?
        }
        "MaxPool" | "AveragePool" => match n.attributes.get("kernel_shape") {
            Some(Attribute::Ints(k)) => {
                let k: Vec<u64> = k.iter().map(|&d| d.max(0) as u64).collect();
                times(numel(y)?, product(&k)?)?
            }
            _ => return Err(bad("no kernel_shape attribute".into())),
        },
        "GlobalAveragePool" | "GlobalMaxPool" | "ReduceMean" | "ReduceSum" | "ReduceMax" => {
            numel(input(0)?)?
        }
        "BatchNormalization" | "InstanceNormalization" => times(4, numel(y)?)?,
        "LayerNormalization" => times(8, numel(y)?)?,
        "Softmax" | "LogSoftmax" => times(5, numel(y)?)?,
        "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze" | "Transpose" | "Identity" | "Concat"
        | "Split" | "Slice" | "Expand" | "Pad" | "Tile" | "Gather" | "Cast" => 0,
        _ => {
            let mut total = 0u64;
            for &o in &n.outputs {
                total = total
                    .checked_add(numel(o)?)
                    .ok_or_else(|| overflow("FLOP"))?;
            }
            total
        }
    };
    let mut values: Vec<ValueId> = n.inputs.iter().flatten().copied().collect();
    values.extend(&n.outputs);
    let bytes = distinct_bytes(graph, &values).ok_or_else(|| overflow("byte"))?;
    Ok(Some(Cost { flops, bytes }))
}

/// The sum of the bytes of the distinct values in `values`, `None` on overflow.
fn distinct_bytes(graph: &Graph, values: &[ValueId]) -> Option<u64> {
    let mut seen: Vec<ValueId> = values.to_vec();
    seen.sort();
    seen.dedup();
    seen.iter()
        .try_fold(0u64, |a, &v| a.checked_add(graph.value(v).bytes))
}

/// A training step built from a forward graph, with the ids a caller needs. The values
/// of the forward graph keep their ids (they are added first, in the same order).
#[derive(Clone, Debug)]
pub struct TrainingStep {
    pub graph: Graph,
    /// Per forward node (by [`NodeId::index`]): its node in the step.
    pub forward_node: Vec<NodeId>,
    /// Per forward node: its backward node, if it has one.
    pub backward_node: Vec<Option<NodeId>>,
    /// Per forward node: its roofline work (`None`: no kernel).
    pub forward_cost: Vec<Option<Cost>>,
    /// Per forward node: its backward's roofline work, if it has a backward.
    pub backward_cost: Vec<Option<Cost>>,
}

/// Builds one training step from `forward`, as the module documentation describes, with
/// latencies from `device`.
pub fn training_step(forward: &Graph, device: &Device) -> Result<TrainingStep, TrainingError> {
    device.validate()?;
    let order = execution_order(forward, memplan_graph::Order::File)?;
    let nodes = forward.nodes();
    let values = forward.values();
    // Forward pass: which values need a gradient.
    let mut needs_grad = vec![false; values.len()];
    for &id in &order {
        let n = forward.node(id);
        let from_trained = n
            .inputs
            .iter()
            .flatten()
            .any(|&v| needs_grad[v.index()] || is_trainable(forward.value(v)));
        if from_trained {
            for &o in &n.outputs {
                let value = forward.value(o);
                needs_grad[o.index()] =
                    value.kind == ValueKind::Activation && value.dtype.is_float();
            }
        }
    }
    let mut graph = Graph::new(forward.name.clone());
    let ge = |node: &Node| {
        let node = node.name.clone();
        move |source: GraphError| TrainingError::Graph {
            node: node.clone(),
            source,
        }
    };
    for value in values {
        graph
            .add_value(value.clone())
            .map_err(TrainingError::Copy)?;
    }
    let mut forward_node = vec![NodeId(0); nodes.len()];
    let mut forward_costs = vec![None; nodes.len()];
    for &id in &order {
        let n = forward.node(id);
        let step_node = graph
            .add_node(
                n.name.clone(),
                n.op_type.clone(),
                n.inputs.clone(),
                n.outputs.clone(),
                n.attributes.clone(),
            )
            .map_err(ge(n))?;
        graph.set_domain(step_node, n.domain.clone());
        let cost = forward_cost(forward, id)?;
        graph.set_latency(step_node, Some(cost.map_or(0.0, |c| device.latency_ms(c))));
        forward_node[id.index()] = step_node;
        forward_costs[id.index()] = cost;
    }
    let is_output: Vec<bool> = {
        let mut v = vec![false; values.len()];
        for &o in forward.outputs() {
            v[o.index()] = true;
        }
        v
    };
    // Backward pass: the gradients produced so far for each value.
    let mut grads: Vec<Vec<ValueId>> = vec![Vec::new(); values.len()];
    let mut backward_node = vec![None; nodes.len()];
    let mut backward_cost = vec![None; nodes.len()];
    for &id in order.iter().rev() {
        let n = forward.node(id);
        let seeds: Vec<ValueId> = n
            .outputs
            .iter()
            .copied()
            .filter(|o| needs_grad[o.index()] && is_output[o.index()])
            .collect();
        let receives = n
            .outputs
            .iter()
            .any(|o| !grads[o.index()].is_empty() || seeds.contains(o));
        let mut grad_inputs: Vec<ValueId> = Vec::new();
        for &v in n.inputs.iter().flatten() {
            if needs_grad[v.index()] && !grad_inputs.contains(&v) {
                grad_inputs.push(v);
            }
        }
        let trainable: Vec<ValueId> = {
            let mut t: Vec<ValueId> = n
                .inputs
                .iter()
                .flatten()
                .copied()
                .filter(|&v| is_trainable(forward.value(v)))
                .collect();
            t.sort();
            t.dedup();
            t
        };
        if !receives || (grad_inputs.is_empty() && trainable.is_empty()) {
            continue;
        }
        let mut inputs: Vec<ValueId> = Vec::new();
        let mut read = |v: ValueId| {
            if !inputs.contains(&v) {
                inputs.push(v);
            }
        };
        for &o in &n.outputs {
            for &g in &grads[o.index()] {
                read(g);
            }
        }
        for &s in &seeds {
            read(s);
        }
        let slot = |k: usize| n.inputs.get(k).copied().flatten();
        match backward_reads(&n.op_type) {
            Reads::Nothing => {}
            Reads::Inputs(slots) => slots.iter().filter_map(|&k| slot(k)).for_each(&mut read),
            Reads::Outputs => n.outputs.iter().copied().for_each(&mut read),
            Reads::InputsAndOutputs(slots) => {
                slots.iter().filter_map(|&k| slot(k)).for_each(&mut read);
                n.outputs.iter().copied().for_each(&mut read);
            }
            Reads::AllInputs => n.inputs.iter().flatten().copied().for_each(&mut read),
        }
        let mut outputs = Vec::with_capacity(grad_inputs.len());
        for &v in &grad_inputs {
            let of = forward.value(v);
            let g = graph
                .add_value(Value {
                    name: format!("grad:{}->{}", n.name, of.name),
                    data: None,
                    kind: ValueKind::Activation,
                    ..of.clone()
                })
                .map_err(ge(n))?;
            grads[v.index()].push(g);
            outputs.push(g);
        }
        // Roofline work: see the module documentation.
        let fwd = forward_costs[id.index()].unwrap_or_default();
        let factor = if is_contraction(&n.op_type) {
            let operands = [slot(0), slot(1)]
                .into_iter()
                .flatten()
                .filter(|&v| needs_grad[v.index()] || is_trainable(forward.value(v)))
                .count();
            operands.max(1) as u64
        } else if trainable.is_empty() {
            1
        } else {
            2
        };
        let overflow = |what| TrainingError::Overflow {
            node: format!("{}.bwd", n.name),
            what,
        };
        let flops = fwd
            .flops
            .checked_mul(factor)
            .ok_or_else(|| overflow("FLOP"))?;
        let mut touched: Vec<ValueId> = inputs.clone();
        touched.extend(&outputs);
        let bytes = distinct_bytes(&graph, &touched)
            .and_then(|b| {
                trainable
                    .iter()
                    .try_fold(b, |a, &w| a.checked_add(forward.value(w).bytes))
            })
            .ok_or_else(|| overflow("byte"))?;
        let cost = Cost { flops, bytes };
        let mut attributes = BTreeMap::new();
        attributes.insert(
            "forward_op".to_string(),
            Attribute::String(n.op_type.clone()),
        );
        let b = graph
            .add_node(
                format!("{}.bwd", n.name),
                "Backward",
                inputs.into_iter().map(Some).collect(),
                outputs,
                attributes,
            )
            .map_err(ge(n))?;
        graph.set_latency(b, Some(device.latency_ms(cost)));
        backward_node[id.index()] = Some(b);
        backward_cost[id.index()] = Some(cost);
    }
    graph
        .set_inputs(forward.inputs().to_vec())
        .and_then(|()| graph.set_outputs(forward.outputs().to_vec()))
        .map_err(TrainingError::Copy)?;
    // Each latency is finite, but a step of many of them may not be: a device whose
    // kernels take 1e305 ms makes every step time infinite and every goal "met".
    let total: f64 = graph.nodes().iter().filter_map(|n| n.latency_ms).sum();
    if !total.is_finite() || total > MAX_STEP_MS {
        return Err(TrainingError::BadDevice {
            message: format!(
                "one training step would take {total:e} ms (more than {MAX_STEP_MS:e} ms, about a year): the launch overhead, throughput or bandwidth is far outside any real device"
            ),
        });
    }
    Ok(TrainingStep {
        graph,
        forward_node,
        backward_node,
        forward_cost: forward_costs,
        backward_cost,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use memplan_graph::{DType, Options, Order};

    /// Builds graphs with shaped values tersely.
    struct Builder(Graph);

    impl Builder {
        fn value(&mut self, name: &str, shape: &[u64], kind: ValueKind) -> ValueId {
            self.typed(name, DType::Float, shape, kind)
        }

        fn typed(&mut self, name: &str, dtype: DType, shape: &[u64], kind: ValueKind) -> ValueId {
            let v = Value::with_shape(name, dtype, shape.to_vec(), kind).unwrap();
            self.0.add_value(v).unwrap()
        }

        fn node(
            &mut self,
            name: &str,
            op: &str,
            inputs: &[ValueId],
            outputs: &[ValueId],
            attributes: &[(&str, Attribute)],
        ) -> NodeId {
            let attributes = attributes
                .iter()
                .map(|(k, a)| (k.to_string(), a.clone()))
                .collect();
            self.0
                .add_node(
                    name,
                    op,
                    inputs.iter().copied().map(Some).collect(),
                    outputs.to_vec(),
                    attributes,
                )
                .unwrap()
        }
    }

    /// x -> conv(w) -> relu -> maxpool -> flatten -> gemm(W, b) -> softmax (output), plus
    /// a shape sub-graph (Shape of the relu output) that takes no gradient.
    fn small() -> (Graph, [ValueId; 10]) {
        use ValueKind::*;
        let mut b = Builder(Graph::new("small"));
        let x = b.value("x", &[1, 3, 8, 8], Input);
        let w = b.value("w", &[4, 3, 3, 3], Weight);
        let c = b.value("c", &[1, 4, 8, 8], Activation);
        let r = b.value("r", &[1, 4, 8, 8], Activation);
        let shape = b.typed("shape", DType::Int64, &[4], Activation);
        let p = b.value("p", &[1, 4, 4, 4], Activation);
        let f = b.value("f", &[1, 64], Activation);
        let wf = b.value("W", &[10, 64], Weight);
        let bias = b.value("bias", &[10], Weight);
        let y = b.value("y", &[1, 10], Activation);
        let s = b.value("s", &[1, 10], Activation);
        b.node("conv", "Conv", &[x, w], &[c], &[]);
        b.node("relu", "Relu", &[c], &[r], &[]);
        b.node("shape", "Shape", &[r], &[shape], &[]);
        let k = Attribute::Ints(vec![2, 2]);
        b.node("pool", "MaxPool", &[r], &[p], &[("kernel_shape", k)]);
        b.node("flatten", "Flatten", &[p], &[f], &[]);
        let t = Attribute::Int(1);
        b.node("gemm", "Gemm", &[f, wf, bias], &[y], &[("transB", t)]);
        b.node("softmax", "Softmax", &[y], &[s], &[]);
        b.0.set_inputs(vec![x]).unwrap();
        b.0.set_outputs(vec![s]).unwrap();
        (b.0, [x, w, c, r, p, f, wf, y, s, shape])
    }

    fn names(g: &Graph, ids: &[Option<ValueId>]) -> Vec<String> {
        ids.iter()
            .map(|v| g.value(v.unwrap()).name.clone())
            .collect()
    }

    #[test]
    fn backward_nodes_read_what_their_op_needs() {
        let (fwd, _) = small();
        let step = training_step(&fwd, &Device::default()).unwrap();
        let g = &step.graph;
        let order: Vec<&str> = g.nodes().iter().map(|n| n.name.as_str()).collect();
        assert_eq!(
            order,
            [
                "conv",
                "relu",
                "shape",
                "pool",
                "flatten",
                "gemm",
                "softmax",
                "softmax.bwd",
                "gemm.bwd",
                "flatten.bwd",
                "pool.bwd",
                "relu.bwd",
                "conv.bwd"
            ]
        );
        // (node, reads in order, writes), worked out by hand from the rule table.
        let expected: &[(&str, &[&str], &[&str])] = &[
            ("softmax.bwd", &["s"], &["grad:softmax->y"]),
            (
                "gemm.bwd",
                &["grad:softmax->y", "f", "W"],
                &["grad:gemm->f"],
            ),
            ("flatten.bwd", &["grad:gemm->f"], &["grad:flatten->p"]),
            (
                "pool.bwd",
                &["grad:flatten->p", "r", "p"],
                &["grad:pool->r"],
            ),
            ("relu.bwd", &["grad:pool->r", "r"], &["grad:relu->c"]),
            ("conv.bwd", &["grad:relu->c", "x", "w"], &[]),
        ];
        for (name, reads, writes) in expected {
            let n = g.node(g.node_by_name(name).unwrap());
            assert_eq!(names(g, &n.inputs), *reads, "{name} reads");
            let outs: Vec<Option<ValueId>> = n.outputs.iter().copied().map(Some).collect();
            assert_eq!(names(g, &outs), *writes, "{name} writes");
            assert_eq!(n.op_type, "Backward");
        }
        // Gradients have the activation's shape and bytes.
        let gr = g.value(g.value_by_name("grad:pool->r").unwrap());
        assert_eq!(gr.shape, Some(vec![1, 4, 8, 8]));
        assert_eq!(gr.bytes, 1024);
        // The Shape node (integer output) has no backward and no kernel.
        assert_eq!(step.backward_node[2], None);
        assert_eq!(step.forward_cost[2], None);
        assert_eq!(g.nodes()[2].latency_ms, Some(0.0));
        // Every activation lives until its last backward reader.
        let a = memplan_graph::analyse(g, Order::File, Options::NONE).unwrap();
        let relu_bwd = g.node_by_name("relu.bwd").unwrap();
        let r = g.value_by_name("r").unwrap();
        assert_eq!(
            a.values[r.index()].lifetime.unwrap().end,
            relu_bwd.0 as u64 + 2
        );
        crate::timing::analyse(g).unwrap();
    }

    #[test]
    fn roofline_of_a_conv_and_a_matmul_by_hand() {
        let (fwd, _) = small();
        // Conv: Y = 1x4x8x8 = 256 elements, W dims 1.. = 3*3*3 = 27: 2 * 256 * 27 FLOPs;
        // bytes: x 768 + w 432 + c 1024.
        let conv = forward_cost(&fwd, NodeId(0)).unwrap().unwrap();
        assert_eq!(
            conv,
            Cost {
                flops: 13_824,
                bytes: 2_224
            }
        );
        // Memory-bound device: 1 GFLOP/s, 1 MB/s, 1 µs: 2224 B / 1e6 B/s = 2.224 ms.
        let slow_memory = Device {
            peak_flops: 1e9,
            mem_bandwidth: 1e6,
            launch_ms: 0.001,
        };
        assert!((slow_memory.latency_ms(conv) - 2.225).abs() < 1e-12);
        // Compute-bound: 1 MFLOP/s, 1 GB/s, no launch: 13824 / 1e6 s = 13.824 ms.
        let slow_compute = Device {
            peak_flops: 1e6,
            mem_bandwidth: 1e9,
            launch_ms: 0.0,
        };
        assert!((slow_compute.latency_ms(conv) - 13.824).abs() < 1e-12);
        // Gemm: M = 1, N = 10, K = 64 (transB): 2 * 1 * 10 * 64 = 1280 FLOPs; bytes: f 256
        // + W 2560 + bias 40 + y 40.
        let gemm = forward_cost(&fwd, NodeId(5)).unwrap().unwrap();
        assert_eq!(
            gemm,
            Cost {
                flops: 1_280,
                bytes: 2_896
            }
        );
        // MatMul, batched: A 2x3x4, B 4x5 -> Y 2x3x5: 2 * 30 * 4 = 240 FLOPs; bytes
        // (24 + 20 + 30) * 4 = 296.
        let mut b = Builder(Graph::new("mm"));
        let a = b.value("a", &[2, 3, 4], ValueKind::Input);
        let w = b.value("b", &[4, 5], ValueKind::Weight);
        let y = b.value("y", &[2, 3, 5], ValueKind::Activation);
        let mm = b.node("mm", "MatMul", &[a, w], &[y], &[]);
        let cost = forward_cost(&b.0, mm).unwrap().unwrap();
        assert_eq!(
            cost,
            Cost {
                flops: 240,
                bytes: 296
            }
        );
        // The V100-like default: memory-bound, 296 B / 900 GB/s + 5 µs.
        let ms = Device::default().latency_ms(cost);
        assert!((ms - (296.0 / 900e9 * 1e3 + 0.005)).abs() < 1e-15);
    }

    #[test]
    fn backward_costs_follow_the_documented_factors() {
        let (fwd, _) = small();
        let step = training_step(&fwd, &Device::default()).unwrap();
        let g = &step.graph;
        // gemm.bwd: f needs a gradient and W is trained: 2 operands, 2x the FLOPs; bytes:
        // reads grad y 40, f 256, W 2560; writes grad f 256; weight grads W 2560 + bias 40.
        assert_eq!(
            step.backward_cost[5],
            Some(Cost {
                flops: 2_560,
                bytes: 5_712
            })
        );
        // conv.bwd: x is the data, only w takes a gradient: 1x; bytes: grad c 1024, x 768,
        // w 432 read, w's gradient 432 written.
        assert_eq!(
            step.backward_cost[0],
            Some(Cost {
                flops: 13_824,
                bytes: 2_656
            })
        );
        // relu.bwd: no weight: 1x the forward's 256 FLOPs.
        assert_eq!(step.backward_cost[1].unwrap().flops, 256);
        let latency = g.node(step.backward_node[5].unwrap()).latency_ms.unwrap();
        assert_eq!(
            latency,
            Device::default().latency_ms(step.backward_cost[5].unwrap())
        );
    }

    #[test]
    fn shared_values_sum_gradients_and_dead_branches_get_none() {
        use ValueKind::*;
        // x -> mm(w) -> a; a feeds both relu (-> r) and add(a, r) (-> out); a dead
        // branch sig(a) -> d is not a graph output and reaches nothing.
        let mut b = Builder(Graph::new("shared"));
        let x = b.value("x", &[2, 2], Input);
        let w = b.value("w", &[2, 2], Weight);
        let a = b.value("a", &[2, 2], Activation);
        let r = b.value("r", &[2, 2], Activation);
        let d = b.value("d", &[2, 2], Activation);
        let out = b.value("out", &[2, 2], Activation);
        b.node("mm", "MatMul", &[x, w], &[a], &[]);
        b.node("relu", "Relu", &[a], &[r], &[]);
        b.node("sig", "Sigmoid", &[a], &[d], &[]);
        b.node("add", "Add", &[a, r], &[out], &[]);
        b.0.set_outputs(vec![out]).unwrap();
        let step = training_step(&b.0, &Device::default()).unwrap();
        let g = &step.graph;
        assert_eq!(step.backward_node[2], None, "dead branch");
        let add = g.node(step.backward_node[3].unwrap());
        assert_eq!(names(g, &add.inputs), ["out"]);
        let mm = g.node(step.backward_node[0].unwrap());
        // The sum of a's two gradients happens inside mm.bwd; add.bwd runs first, so
        // its gradient comes first.
        assert_eq!(
            names(g, &mm.inputs),
            ["grad:add->a", "grad:relu->a", "x", "w"]
        );
    }

    #[test]
    fn missing_shapes_and_bad_devices_are_errors() {
        let mut g = Graph::new("noshape");
        let x = g
            .add_value(Value::with_bytes("x", DType::Float, 16, ValueKind::Input))
            .unwrap();
        let y = g
            .add_value(Value::with_bytes(
                "y",
                DType::Float,
                16,
                ValueKind::Activation,
            ))
            .unwrap();
        g.add_node("act", "Relu", vec![Some(x)], vec![y], BTreeMap::new())
            .unwrap();
        let e = training_step(&g, &Device::default()).unwrap_err();
        assert_eq!(
            e,
            TrainingError::NoShape {
                node: "act".into(),
                value: "y".into()
            }
        );
        assert!(e.to_string().contains("--input-shape"), "{e}");
        let (fwd, _) = small();
        for device in [
            Device {
                peak_flops: 0.0,
                ..Device::default()
            },
            Device {
                mem_bandwidth: f64::NAN,
                ..Device::default()
            },
            Device {
                launch_ms: -1.0,
                ..Device::default()
            },
        ] {
            assert!(matches!(
                training_step(&fwd, &device),
                Err(TrainingError::BadDevice { .. })
            ));
        }
    }

    #[test]
    fn flop_overflow_is_an_error() {
        let mut b = Builder(Graph::new("big"));
        // Y has 2^44 elements; 2 * 2^44 * K = 2^67 FLOPs.
        let big = 1u64 << 22;
        let a = b.typed("a", DType::Bool, &[big, big], ValueKind::Input);
        let w = b.typed("w", DType::Bool, &[big, big], ValueKind::Weight);
        let y = b.typed("y", DType::Bool, &[big, big], ValueKind::Activation);
        let mm = b.node("mm", "MatMul", &[a, w], &[y], &[]);
        assert_eq!(
            forward_cost(&b.0, mm).unwrap_err(),
            TrainingError::Overflow {
                node: "mm".into(),
                what: "FLOP"
            }
        );
    }
}
