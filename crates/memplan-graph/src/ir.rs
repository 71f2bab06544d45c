//! The graph IR: nodes, values (hyperedges), graph inputs and outputs, control edges.
//!
//! ```text
//!            ┌──────────┐  v1   ┌──────────┐  v2   ┌──────────┐
//!  input ───►│ n0: Conv │──────►│ n1: Relu │──┬───►│ n2: Conv │──► v3
//!  (value)   └──────────┘       └──────────┘  │    └──────────┘
//!               ▲ weight w0                   └───►┌──────────┐
//!                                                  │ n3: Add  │──► output
//!                                        v3 ──────►└──────────┘
//! ```
//! `v2` is one value (one producer output, `n1`'s output 0) with two consumers (`n2` and
//! `n3`): a hyperedge. Weights and constants are values without a producer node; they are
//! reported but never placed in the activation arena.
//!
//! Contract of a [`Graph`] (kept by its methods, which are the only way to build one):
//! - value names are unique, node names are unique (empty node names are replaced by
//!   `node_<index>`);
//! - every value has at most one producer, and the producer's output list names it;
//! - every consumer entry `(node, slot)` of a value matches `node.inputs[slot]`;
//! - values of kind [`ValueKind::Weight`] and [`ValueKind::Input`] never have a producer
//!   node; a value of kind [`ValueKind::Activation`] gets one when a node that outputs it
//!   is added; a [`ValueKind::Constant`] value may have one (the output of an ONNX
//!   `Constant` node keeps its node, so that node positions stay the file's) or not (a
//!   folded value); so may a [`ValueKind::Host`] value (a copy to host memory);
//! - when a value has a shape, `bytes == shape_bytes(dtype, shape)` (checked): the element
//!   count times the element size, rounded up to whole bytes for packed 4-bit types;
//! - ids index the vectors: `graph.node(id)`, `graph.value(id)`.
//!
//! The node order is the order in which nodes were added (the file's order for importers);
//! whether it is topological is checked by the execution-order analysis, not here, so that
//! a bad file can be reported with the node at fault.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde::{Deserialize, Serialize};

/// Index of a node in [`Graph::nodes`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u32);

/// Index of a value in [`Graph::values`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ValueId(pub u32);

impl NodeId {
    /// Position in [`Graph::nodes`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl ValueId {
    /// Position in [`Graph::values`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Element type of a tensor (the ONNX set; names as ONNX spells them in upper case).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum DType {
    Float,
    Uint8,
    Int8,
    Uint16,
    Int16,
    Int32,
    Int64,
    String,
    Bool,
    Float16,
    Double,
    Uint32,
    Uint64,
    Complex64,
    Complex128,
    Bfloat16,
    Float8e4m3fn,
    Float8e4m3fnuz,
    Float8e5m2,
    Float8e5m2fnuz,
    /// 4-bit unsigned integer, two per byte (ONNX `UINT4`, code 21).
    Uint4,
    /// 4-bit signed integer, two per byte (ONNX `INT4`, code 22).
    Int4,
    /// 4-bit float (ONNX `FLOAT4E2M1`, code 23), two per byte.
    Float4e2m1,
}

impl DType {
    /// Every element type, in ONNX code order.
    pub const ALL: [DType; 23] = [
        DType::Float,
        DType::Uint8,
        DType::Int8,
        DType::Uint16,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::String,
        DType::Bool,
        DType::Float16,
        DType::Double,
        DType::Uint32,
        DType::Uint64,
        DType::Complex64,
        DType::Complex128,
        DType::Bfloat16,
        DType::Float8e4m3fn,
        DType::Float8e4m3fnuz,
        DType::Float8e5m2,
        DType::Float8e5m2fnuz,
        DType::Uint4,
        DType::Int4,
        DType::Float4e2m1,
    ];

    /// The type with this upper-case ONNX name (as [`DType::name`] spells it).
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|t| t.name() == name)
    }

    /// True for the floating-point types (the ones gradients flow through).
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::Float
                | DType::Float16
                | DType::Double
                | DType::Bfloat16
                | DType::Float8e4m3fn
                | DType::Float8e4m3fnuz
                | DType::Float8e5m2
                | DType::Float8e5m2fnuz
                | DType::Float4e2m1
        )
    }

    /// Bits per element: 4 for the packed 4-bit types, `8 * size_bytes` otherwise; `None`
    /// for `String`.
    pub fn size_bits(self) -> Option<u64> {
        match self {
            DType::Uint4 | DType::Int4 | DType::Float4e2m1 => Some(4),
            t => t.size_bytes().map(|b| 8 * b),
        }
    }

    /// Bytes per element. `String` has no fixed size and answers `None`; so do the packed
    /// 4-bit types (`Uint4`, `Int4`, `Float4e2m1`), whose elements are half a byte: use
    /// [`DType::size_bits`] or [`shape_bytes`] for them.
    pub fn size_bytes(self) -> Option<u64> {
        Some(match self {
            DType::Bool
            | DType::Uint8
            | DType::Int8
            | DType::Float8e4m3fn
            | DType::Float8e4m3fnuz
            | DType::Float8e5m2
            | DType::Float8e5m2fnuz => 1,
            DType::Uint16 | DType::Int16 | DType::Float16 | DType::Bfloat16 => 2,
            DType::Float | DType::Int32 | DType::Uint32 => 4,
            DType::Double | DType::Int64 | DType::Uint64 | DType::Complex64 => 8,
            DType::Complex128 => 16,
            DType::String | DType::Uint4 | DType::Int4 | DType::Float4e2m1 => return None,
        })
    }

    /// The ONNX `TensorProto.DataType` number, e.g. 1 for `FLOAT`.
    pub fn onnx_code(self) -> i32 {
        match self {
            DType::Float => 1,
            DType::Uint8 => 2,
            DType::Int8 => 3,
            DType::Uint16 => 4,
            DType::Int16 => 5,
            DType::Int32 => 6,
            DType::Int64 => 7,
            DType::String => 8,
            DType::Bool => 9,
            DType::Float16 => 10,
            DType::Double => 11,
            DType::Uint32 => 12,
            DType::Uint64 => 13,
            DType::Complex64 => 14,
            DType::Complex128 => 15,
            DType::Bfloat16 => 16,
            DType::Float8e4m3fn => 17,
            DType::Float8e4m3fnuz => 18,
            DType::Float8e5m2 => 19,
            DType::Float8e5m2fnuz => 20,
            DType::Uint4 => 21,
            DType::Int4 => 22,
            DType::Float4e2m1 => 23,
        }
    }

    /// The type with this ONNX `TensorProto.DataType` number, if memplan knows it.
    pub fn from_onnx_code(code: i32) -> Option<DType> {
        Some(match code {
            1 => DType::Float,
            2 => DType::Uint8,
            3 => DType::Int8,
            4 => DType::Uint16,
            5 => DType::Int16,
            6 => DType::Int32,
            7 => DType::Int64,
            8 => DType::String,
            9 => DType::Bool,
            10 => DType::Float16,
            11 => DType::Double,
            12 => DType::Uint32,
            13 => DType::Uint64,
            14 => DType::Complex64,
            15 => DType::Complex128,
            16 => DType::Bfloat16,
            17 => DType::Float8e4m3fn,
            18 => DType::Float8e4m3fnuz,
            19 => DType::Float8e5m2,
            20 => DType::Float8e5m2fnuz,
            21 => DType::Uint4,
            22 => DType::Int4,
            23 => DType::Float4e2m1,
            _ => return None,
        })
    }

    /// The upper-case ONNX name, e.g. `FLOAT` (as in the reference `tensors.csv` files).
    pub fn name(self) -> &'static str {
        match self {
            DType::Float => "FLOAT",
            DType::Uint8 => "UINT8",
            DType::Int8 => "INT8",
            DType::Uint16 => "UINT16",
            DType::Int16 => "INT16",
            DType::Int32 => "INT32",
            DType::Int64 => "INT64",
            DType::String => "STRING",
            DType::Bool => "BOOL",
            DType::Float16 => "FLOAT16",
            DType::Double => "DOUBLE",
            DType::Uint32 => "UINT32",
            DType::Uint64 => "UINT64",
            DType::Complex64 => "COMPLEX64",
            DType::Complex128 => "COMPLEX128",
            DType::Bfloat16 => "BFLOAT16",
            DType::Float8e4m3fn => "FLOAT8E4M3FN",
            DType::Float8e4m3fnuz => "FLOAT8E4M3FNUZ",
            DType::Float8e5m2 => "FLOAT8E5M2",
            DType::Float8e5m2fnuz => "FLOAT8E5M2FNUZ",
            DType::Uint4 => "UINT4",
            DType::Int4 => "INT4",
            DType::Float4e2m1 => "FLOAT4E2M1",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The contents of a small tensor known at import time (shape operands, `Constant` nodes).
#[derive(Clone, Debug, PartialEq)]
pub enum TensorData {
    /// Integer elements (any integer or bool type), widened to `i64`.
    Ints(Vec<i64>),
    /// Floating-point elements (any float type), widened to `f64`.
    Floats(Vec<f64>),
    /// The contents are not known (external data, strings, too large).
    Unknown,
}

/// A tensor value carried by an attribute or a constant: type, dims and known contents.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub dtype: DType,
    pub dims: Vec<u64>,
    pub data: TensorData,
}

/// A node attribute (the ONNX attribute kinds memplan reads).
#[derive(Clone, Debug, PartialEq)]
pub enum Attribute {
    Int(i64),
    Ints(Vec<i64>),
    Float(f64),
    Floats(Vec<f64>),
    String(String),
    Strings(Vec<String>),
    Tensor(Tensor),
}

/// What a value is, which decides where its bytes live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ValueKind {
    /// A graph input: present from step 0, in the activation arena.
    Input,
    /// Produced by a node: in the activation arena.
    Activation,
    /// A trained parameter (ONNX initialiser): reported, not in the activation arena.
    Weight,
    /// A constant (a `Constant` node's output, a folded shape value): reported, not in
    /// the activation arena. It may have a producer node (a `Constant` node).
    Constant,
    /// A value in host memory (the output of a copy to the host, e.g. a swap's
    /// `SwapOut` node): reported, not in the device's activation arena. It may have a
    /// producer node.
    Host,
}

/// A tensor: a hyperedge from one producer output to any number of consumer inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    /// Unique name (the ONNX value name).
    pub name: String,
    pub dtype: DType,
    /// Dimensions, when known. A value may carry only `bytes` (profiles without shapes).
    pub shape: Option<Vec<u64>>,
    /// Size in bytes; equals `product(shape) * dtype size` when the shape is known.
    pub bytes: u64,
    pub kind: ValueKind,
    /// The node output that produces it, as `(node, output slot)`; `None` for inputs,
    /// weights and folded constants.
    pub producer: Option<(NodeId, usize)>,
    /// Every node input that reads it, as `(node, input slot)`, in node order.
    pub consumers: Vec<(NodeId, usize)>,
    /// Contents known at import time (small constants), used by shape inference.
    pub data: Option<TensorData>,
}

impl Value {
    /// A value with a known shape; bytes computed from it. `None` when the element size is
    /// not fixed (`STRING`) or the byte count overflows `u64`.
    pub fn with_shape(
        name: impl Into<String>,
        dtype: DType,
        shape: Vec<u64>,
        kind: ValueKind,
    ) -> Option<Value> {
        let bytes = shape_bytes(dtype, &shape)?;
        Some(Value {
            name: name.into(),
            dtype,
            shape: Some(shape),
            bytes,
            kind,
            producer: None,
            consumers: Vec::new(),
            data: None,
        })
    }

    /// A value known only by its size in bytes.
    pub fn with_bytes(name: impl Into<String>, dtype: DType, bytes: u64, kind: ValueKind) -> Value {
        Value {
            name: name.into(),
            dtype,
            shape: None,
            bytes,
            kind,
            producer: None,
            consumers: Vec::new(),
            data: None,
        }
    }

    /// True for values that occupy the activation arena (inputs and activations).
    pub fn is_activation(&self) -> bool {
        matches!(self.kind, ValueKind::Input | ValueKind::Activation)
    }
}

/// `product(shape) * size of dtype`, or `None` on overflow or for `STRING`. Packed 4-bit
/// types take `ceil(product(shape) / 2)` bytes (two elements per byte, the last byte
/// half-used for an odd count), as ONNX stores them.
pub fn shape_bytes(dtype: DType, shape: &[u64]) -> Option<u64> {
    let bits = dtype.size_bits()?;
    if bits % 8 == 0 {
        return shape
            .iter()
            .try_fold(bits / 8, |acc, &d| acc.checked_mul(d));
    }
    let n = shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))?;
    Some(n.checked_mul(bits)?.div_ceil(8))
}

/// An operator.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Unique name.
    pub name: String,
    /// Operator type, e.g. `Conv`.
    pub op_type: String,
    /// Operator domain (`""` for the default ONNX domain).
    pub domain: String,
    /// Inputs by slot; `None` for an omitted optional input.
    pub inputs: Vec<Option<ValueId>>,
    /// Outputs by slot.
    pub outputs: Vec<ValueId>,
    /// Attributes by name.
    pub attributes: BTreeMap<String, Attribute>,
    /// Time the operator takes, in milliseconds, when known.
    pub latency_ms: Option<f64>,
}

/// What is wrong with a graph being built, naming the node or value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    #[error("value name '{name}' is used twice; value names must be unique")]
    DuplicateValue { name: String },
    #[error("node name '{name}' is used twice; node names must be unique")]
    DuplicateNode { name: String },
    #[error("node '{node}': output '{value}' is already produced by node '{producer}'; a value has one producer")]
    TwoProducers {
        node: String,
        value: String,
        producer: String,
    },
    #[error("node '{node}': output '{value}' is a {kind:?} value, which no node may produce (only activations, constants and host values have producers)")]
    ProducedNonActivation {
        node: String,
        value: String,
        kind: ValueKind,
    },
    #[error("value '{name}': shape {shape:?} of {dtype} does not give {bytes} bytes")]
    BytesMismatch {
        name: String,
        dtype: DType,
        shape: Vec<u64>,
        bytes: u64,
    },
    #[error("unknown value id {id} (the graph has {len} values)")]
    UnknownValue { id: u32, len: usize },
    #[error("unknown node id {id} (the graph has {len} nodes)")]
    UnknownNode { id: u32, len: usize },
    #[error("too many nodes or values for 32-bit ids")]
    TooLarge,
}

/// A dataflow graph. See the module documentation for its contract.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Graph {
    /// A name for messages (the model's or file's name).
    pub name: String,
    nodes: Vec<Node>,
    values: Vec<Value>,
    inputs: Vec<ValueId>,
    outputs: Vec<ValueId>,
    control_edges: Vec<(NodeId, NodeId)>,
    value_names: HashMap<String, ValueId>,
    node_names: HashMap<String, NodeId>,
    /// Values whose shape is an upper bound of a data-dependent size, with the reason.
    bounded: BTreeMap<ValueId, String>,
}

impl Graph {
    /// An empty graph.
    pub fn new(name: impl Into<String>) -> Graph {
        Graph {
            name: name.into(),
            ..Graph::default()
        }
    }

    /// An empty graph with room for `nodes` nodes and `values` values.
    pub fn with_capacity(name: impl Into<String>, nodes: usize, values: usize) -> Graph {
        Graph {
            name: name.into(),
            nodes: Vec::with_capacity(nodes),
            values: Vec::with_capacity(values),
            value_names: HashMap::with_capacity(values),
            node_names: HashMap::with_capacity(nodes),
            ..Graph::default()
        }
    }

    /// Adds a value (without producer or consumers: those come from [`Graph::add_node`]).
    pub fn add_value(&mut self, mut value: Value) -> Result<ValueId, GraphError> {
        if self.value_names.contains_key(&value.name) {
            return Err(GraphError::DuplicateValue { name: value.name });
        }
        if let Some(shape) = &value.shape {
            if shape_bytes(value.dtype, shape) != Some(value.bytes) {
                return Err(GraphError::BytesMismatch {
                    name: value.name.clone(),
                    dtype: value.dtype,
                    shape: shape.clone(),
                    bytes: value.bytes,
                });
            }
        }
        let id = ValueId(u32::try_from(self.values.len()).map_err(|_| GraphError::TooLarge)?);
        value.producer = None;
        value.consumers.clear();
        self.value_names.insert(value.name.clone(), id);
        self.values.push(value);
        Ok(id)
    }

    /// Adds a node reading `inputs` and writing `outputs` (values already added), and
    /// records it as their consumer and producer. An empty name becomes `node_<index>`.
    pub fn add_node(
        &mut self,
        name: impl Into<String>,
        op_type: impl Into<String>,
        inputs: Vec<Option<ValueId>>,
        outputs: Vec<ValueId>,
        attributes: BTreeMap<String, Attribute>,
    ) -> Result<NodeId, GraphError> {
        let mut name = name.into();
        if name.is_empty() {
            name = format!("node_{}", self.nodes.len());
        }
        if self.node_names.contains_key(&name) {
            return Err(GraphError::DuplicateNode { name });
        }
        for id in inputs.iter().flatten().chain(&outputs) {
            self.check_value(*id)?;
        }
        let id = NodeId(u32::try_from(self.nodes.len()).map_err(|_| GraphError::TooLarge)?);
        for &out in &outputs {
            let value = &self.values[out.index()];
            if let Some((producer, _)) = value.producer {
                return Err(GraphError::TwoProducers {
                    node: name,
                    value: value.name.clone(),
                    producer: self.nodes[producer.index()].name.clone(),
                });
            }
            if !matches!(
                value.kind,
                ValueKind::Activation | ValueKind::Constant | ValueKind::Host
            ) {
                return Err(GraphError::ProducedNonActivation {
                    node: name,
                    value: value.name.clone(),
                    kind: value.kind,
                });
            }
        }
        for (slot, &out) in outputs.iter().enumerate() {
            self.values[out.index()].producer = Some((id, slot));
        }
        for (slot, input) in inputs.iter().enumerate() {
            if let Some(v) = input {
                self.values[v.index()].consumers.push((id, slot));
            }
        }
        self.node_names.insert(name.clone(), id);
        self.nodes.push(Node {
            name,
            op_type: op_type.into(),
            domain: String::new(),
            inputs,
            outputs,
            attributes,
            latency_ms: None,
        });
        Ok(id)
    }

    /// Declares the graph inputs (values present before the first node).
    pub fn set_inputs(&mut self, inputs: Vec<ValueId>) -> Result<(), GraphError> {
        for &id in &inputs {
            self.check_value(id)?;
        }
        self.inputs = inputs;
        Ok(())
    }

    /// Declares the graph outputs (values that live to the last step).
    pub fn set_outputs(&mut self, outputs: Vec<ValueId>) -> Result<(), GraphError> {
        for &id in &outputs {
            self.check_value(id)?;
        }
        self.outputs = outputs;
        Ok(())
    }

    /// Adds a control edge: `to` may not start before `from` has finished.
    pub fn add_control_edge(&mut self, from: NodeId, to: NodeId) -> Result<(), GraphError> {
        for id in [from, to] {
            if id.index() >= self.nodes.len() {
                return Err(GraphError::UnknownNode {
                    id: id.0,
                    len: self.nodes.len(),
                });
            }
        }
        self.control_edges.push((from, to));
        Ok(())
    }

    /// Sets a node's latency in milliseconds.
    pub fn set_latency(&mut self, node: NodeId, latency_ms: Option<f64>) {
        self.nodes[node.index()].latency_ms = latency_ms;
    }

    /// Sets a node's domain.
    pub fn set_domain(&mut self, node: NodeId, domain: impl Into<String>) {
        self.nodes[node.index()].domain = domain.into();
    }

    /// Marks a value's shape as an upper bound of a size known only at run time
    /// (`NonZero`, `NonMaxSuppression`, …); `why` says where the bound comes from. Planning
    /// it at the bound is safe: the real tensor is never larger.
    pub fn set_bounded(&mut self, value: ValueId, why: impl Into<String>) {
        self.bounded.insert(value, why.into());
    }

    /// Why a value's shape is an upper bound, `None` when it is exact.
    pub fn bound_reason(&self, value: ValueId) -> Option<&str> {
        self.bounded.get(&value).map(String::as_str)
    }

    /// Every value planned at an upper bound, with the reason, in id order.
    pub fn bounded(&self) -> impl Iterator<Item = (ValueId, &str)> {
        self.bounded.iter().map(|(&v, w)| (v, w.as_str()))
    }

    /// Sets the known contents of a value (shape inference's constants).
    pub fn set_data(&mut self, value: ValueId, data: Option<TensorData>) {
        self.values[value.index()].data = data;
    }

    fn check_value(&self, id: ValueId) -> Result<(), GraphError> {
        if id.index() >= self.values.len() {
            return Err(GraphError::UnknownValue {
                id: id.0,
                len: self.values.len(),
            });
        }
        Ok(())
    }

    /// Nodes in the order they were added.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Values in the order they were added.
    pub fn values(&self) -> &[Value] {
        &self.values
    }

    /// One node. Panics for an id not from this graph.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    /// One value. Panics for an id not from this graph.
    pub fn value(&self, id: ValueId) -> &Value {
        &self.values[id.index()]
    }

    /// The value with this name.
    pub fn value_by_name(&self, name: &str) -> Option<ValueId> {
        self.value_names.get(name).copied()
    }

    /// The node with this name.
    pub fn node_by_name(&self, name: &str) -> Option<NodeId> {
        self.node_names.get(name).copied()
    }

    /// Graph inputs.
    pub fn inputs(&self) -> &[ValueId] {
        &self.inputs
    }

    /// Graph outputs.
    pub fn outputs(&self) -> &[ValueId] {
        &self.outputs
    }

    /// Control edges `(from, to)`.
    pub fn control_edges(&self) -> &[(NodeId, NodeId)] {
        &self.control_edges
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn act(g: &mut Graph, name: &str, shape: Vec<u64>) -> ValueId {
        g.add_value(Value::with_shape(name, DType::Float, shape, ValueKind::Activation).unwrap())
            .unwrap()
    }

    #[test]
    fn values_are_hyperedges() {
        let mut g = Graph::new("t");
        let x = g
            .add_value(Value::with_shape("x", DType::Float, vec![1, 4], ValueKind::Input).unwrap())
            .unwrap();
        let a = act(&mut g, "a", vec![1, 4]);
        let b = act(&mut g, "b", vec![1, 4]);
        let c = act(&mut g, "c", vec![1, 4]);
        let n0 = g
            .add_node("relu", "Relu", vec![Some(x)], vec![a], BTreeMap::new())
            .unwrap();
        let n1 = g
            .add_node("", "Sigmoid", vec![Some(a)], vec![b], BTreeMap::new())
            .unwrap();
        let n2 = g
            .add_node(
                "add",
                "Add",
                vec![Some(a), Some(b)],
                vec![c],
                BTreeMap::new(),
            )
            .unwrap();
        g.set_inputs(vec![x]).unwrap();
        g.set_outputs(vec![c]).unwrap();
        assert_eq!(g.value(a).producer, Some((n0, 0)));
        assert_eq!(g.value(a).consumers, vec![(n1, 0), (n2, 0)]);
        assert_eq!(g.node(n1).name, "node_1");
        assert_eq!(g.value(c).bytes, 16);
    }

    #[test]
    fn contract_violations_are_errors() {
        let mut g = Graph::new("t");
        let a = act(&mut g, "a", vec![2]);
        assert!(matches!(
            g.add_value(Value::with_bytes(
                "a",
                DType::Float,
                8,
                ValueKind::Activation
            )),
            Err(GraphError::DuplicateValue { .. })
        ));
        let mut wrong = Value::with_shape("w", DType::Float, vec![2], ValueKind::Weight).unwrap();
        wrong.bytes = 7;
        assert!(matches!(
            g.add_value(wrong),
            Err(GraphError::BytesMismatch { .. })
        ));
        g.add_node("n", "Relu", vec![], vec![a], BTreeMap::new())
            .unwrap();
        assert!(matches!(
            g.add_node("m", "Relu", vec![], vec![a], BTreeMap::new()),
            Err(GraphError::TwoProducers { .. })
        ));
        assert!(matches!(
            g.add_node("n", "Relu", vec![], vec![], BTreeMap::new()),
            Err(GraphError::DuplicateNode { .. })
        ));
        let w = g
            .add_value(Value::with_bytes("w2", DType::Float, 8, ValueKind::Weight))
            .unwrap();
        assert!(matches!(
            g.add_node("p", "Relu", vec![], vec![w], BTreeMap::new()),
            Err(GraphError::ProducedNonActivation { .. })
        ));
        assert!(g
            .add_node(
                "q",
                "Relu",
                vec![Some(ValueId(99))],
                vec![],
                BTreeMap::new()
            )
            .is_err());
    }

    #[test]
    fn onnx_codes_round_trip() {
        for code in 1..=23 {
            let t = DType::from_onnx_code(code).unwrap();
            assert_eq!(t.onnx_code(), code);
        }
        assert_eq!(DType::from_onnx_code(0), None);
        for t in DType::ALL {
            assert_eq!(DType::from_name(t.name()), Some(t));
        }
        assert_eq!(DType::from_name("float"), None);
        assert_eq!(shape_bytes(DType::Float, &[1, 3, 224, 224]), Some(602112));
        assert_eq!(shape_bytes(DType::Float, &[u64::MAX, 2]), None);
        // Packed 4-bit types: two per byte, an odd count rounds up.
        assert_eq!(shape_bytes(DType::Int4, &[3, 5]), Some(8));
        assert_eq!(shape_bytes(DType::Uint4, &[4, 4]), Some(8));
        assert_eq!(shape_bytes(DType::Int4, &[]), Some(1));
        assert_eq!(shape_bytes(DType::Int4, &[0]), Some(0));
        assert_eq!(shape_bytes(DType::Int4, &[u64::MAX, 1]), None);
        assert_eq!(DType::Int4.size_bytes(), None);
    }
}
