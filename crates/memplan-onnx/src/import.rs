//! From a decoded [`ModelProto`] to a [`Graph`]: values, kinds, attributes, the file's node
//! order, and inference of every node output in dependency order.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};

use memplan_graph::{
    Attribute, DType, Graph, NodeId, Tensor, TensorData, Value, ValueId, ValueKind,
};

use crate::fold::Data;
use crate::infer::{self, elements, Ctx, Info, NodeError, MAX_FOLD_ELEMENTS};
use crate::proto::{self, attribute_type as at, DimensionValue, ModelProto, TensorProto};
use crate::{ImportOptions, OnnxError};

mod control;

/// Where a value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    Input,
    Initializer,
    /// Output `slot` of node `node` (index into the file's node list).
    Node(usize, usize),
}

struct Importer<'a> {
    source: &'a str,
}

impl Importer<'_> {
    fn value_err(&self, value: &str, message: impl Into<String>) -> OnnxError {
        OnnxError::Value {
            source_name: self.source.into(),
            value: value.to_string(),
            message: message.into(),
        }
    }

    fn graph_err(&self, source: memplan_graph::GraphError) -> OnnxError {
        OnnxError::Graph {
            source_name: self.source.into(),
            source,
        }
    }

    fn dtype(&self, value: &str, code: i32) -> Result<DType, OnnxError> {
        match DType::from_onnx_code(code) {
            Some(DType::String) => Err(self.value_err(
                value,
                "STRING tensors have no fixed size and are not supported",
            )),
            Some(t) => Ok(t),
            None => Err(self.value_err(
                value,
                format!("element type {code} is not a known TensorProto.DataType"),
            )),
        }
    }

    fn dims(&self, value: &str, dims: &[i64]) -> Result<Vec<u64>, OnnxError> {
        dims.iter()
            .enumerate()
            .map(|(i, &d)| {
                u64::try_from(d)
                    .map_err(|_| self.value_err(value, format!("dim {i} is negative ({d})")))
            })
            .collect()
    }

    /// dtype, dims and (for small tensors whose class `read` accepts) contents of a tensor.
    /// Contents of types memplan does not fold (FLOAT16, BFLOAT16, FLOAT8, complex,
    /// unsigned 32/64-bit outside `raw_data`) stay unknown.
    /// External data is never followed; inline contents are read only when small.
    fn tensor(
        &self,
        t: &TensorProto,
        name: &str,
        read: impl Fn(DType) -> bool,
    ) -> Result<Info, OnnxError> {
        let dtype = self.dtype(name, t.data_type)?;
        let shape = self.dims(name, &t.dims)?;
        if memplan_graph::ir::shape_bytes(dtype, &shape).is_none() {
            return Err(self.value_err(
                name,
                format!("{dtype} {shape:?} overflows 64-bit byte counts"),
            ));
        }
        let n = elements(&shape).unwrap_or(u64::MAX);
        let external = t.data_location == proto::DATA_LOCATION_EXTERNAL;
        if !external {
            self.check_data_length(t, name, dtype, &shape, n)?;
        }
        let data = if external || n > MAX_FOLD_ELEMENTS || !read(dtype) {
            None
        } else {
            self.tensor_data(t, name, dtype, n as usize)?
        };
        Ok(Info::with_data(dtype, shape, data))
    }

    /// Inline contents, when present, must be exactly what the dims say: `raw_data` holds
    /// the tensor's bytes, a typed field (`float_data`, `int32_data`, …) one entry per
    /// element (two per complex element). Stripped models carry no contents, which is
    /// fine; contents of another length are an error, whatever the tensor's size or type.
    fn check_data_length(
        &self,
        t: &TensorProto,
        name: &str,
        dtype: DType,
        shape: &[u64],
        n: u64,
    ) -> Result<(), OnnxError> {
        let typed = !(t.float_data.is_empty()
            && t.int32_data.is_empty()
            && t.int64_data.is_empty()
            && t.double_data.is_empty());
        if !t.raw_data.is_empty() && typed {
            return Err(self.value_err(
                name,
                "the tensor has both raw_data and typed data: ONNX keeps a tensor's contents \
                 in one of them",
            ));
        }
        if !t.raw_data.is_empty() {
            let need = memplan_graph::ir::shape_bytes(dtype, shape).unwrap_or(u64::MAX);
            if t.raw_data.len() as u64 != need {
                return Err(self.value_err(
                    name,
                    format!(
                        "raw_data has {} bytes but dims {shape:?} of {dtype} need {need}: \
                         the dims and the data disagree",
                        t.raw_data.len(),
                    ),
                ));
            }
            return Ok(());
        }
        let (field, entries, per_element) = match dtype {
            DType::Float => ("float_data", t.float_data.len(), 1),
            DType::Complex64 => ("float_data", t.float_data.len(), 2),
            DType::Double => ("double_data", t.double_data.len(), 1),
            DType::Complex128 => ("double_data", t.double_data.len(), 2),
            DType::Int64 => ("int64_data", t.int64_data.len(), 1),
            DType::Int32
            | DType::Int16
            | DType::Int8
            | DType::Uint16
            | DType::Uint8
            | DType::Bool
            | DType::Float16
            | DType::Bfloat16
            | DType::Float8e4m3fn
            | DType::Float8e4m3fnuz
            | DType::Float8e5m2
            | DType::Float8e5m2fnuz => ("int32_data", t.int32_data.len(), 1),
            // 4-bit types pack their typed data; uint64_data and string_data are not read.
            _ => return Ok(()),
        };
        if entries != 0 && Some(entries as u64) != n.checked_mul(per_element) {
            return Err(self.value_err(
                name,
                format!(
                    "{field} has {entries} entries but dims {shape:?} give {n} elements of \
                     {dtype}: the dims and the data disagree"
                ),
            ));
        }
        Ok(())
    }

    fn tensor_data(
        &self,
        t: &TensorProto,
        name: &str,
        dtype: DType,
        n: usize,
    ) -> Result<Option<Data>, OnnxError> {
        let size = dtype.size_bytes().unwrap_or(0) as usize;
        let raw = &t.raw_data;
        // `check_data_length` has held the contents to the dims.
        let data = if !raw.is_empty() {
            let le = |i: usize, w: usize| -> u64 {
                let mut b = [0u8; 8];
                b[..w].copy_from_slice(&raw[i * w..i * w + w]);
                u64::from_le_bytes(b)
            };
            let sext = |v: u64, w: usize| -> i64 {
                let shift = 64 - 8 * w as u32;
                ((v << shift) as i64) >> shift
            };
            match dtype {
                DType::Float => Data::Floats(
                    (0..n)
                        .map(|i| f32::from_bits(le(i, 4) as u32) as f64)
                        .collect(),
                ),
                DType::Double => Data::Floats((0..n).map(|i| f64::from_bits(le(i, 8))).collect()),
                DType::Float16 => {
                    Data::Floats((0..n).map(|i| half_to_f64(le(i, 2) as u16)).collect())
                }
                DType::Int8 | DType::Int16 | DType::Int32 | DType::Int64 => {
                    Data::Ints((0..n).map(|i| sext(le(i, size), size)).collect())
                }
                DType::Uint8 | DType::Uint16 | DType::Uint32 | DType::Bool => {
                    Data::Ints((0..n).map(|i| le(i, size) as i64).collect())
                }
                DType::Uint64 => Data::Ints(
                    (0..n)
                        .map(|i| i64::try_from(le(i, 8)).ok())
                        .collect::<Option<_>>()
                        .ok_or_else(|| {
                            self.value_err(name, "a UINT64 element exceeds the int64 range")
                        })?,
                ),
                _ => return Ok(None),
            }
        } else {
            let d = match dtype {
                DType::Int64 => Some(Data::Ints(t.int64_data.clone())),
                DType::Int32
                | DType::Int16
                | DType::Int8
                | DType::Uint16
                | DType::Uint8
                | DType::Bool => Some(Data::Ints(
                    t.int32_data.iter().map(|&v| i64::from(v)).collect(),
                )),
                DType::Float => Some(Data::Floats(
                    t.float_data.iter().map(|&v| f64::from(v)).collect(),
                )),
                DType::Double => Some(Data::Floats(t.double_data.clone())),
                // FLOAT16 typed data sits in int32_data, one element (its bits) each.
                DType::Float16 => Some(Data::Floats(
                    t.int32_data
                        .iter()
                        .map(|&v| half_to_f64(v as u16))
                        .collect(),
                )),
                _ => None,
            };
            match d {
                // Empty: a stripped tensor, contents unknown.
                Some(d) if d.len() == n => d,
                _ => return Ok(None),
            }
        };
        Ok(Some(data))
    }

    fn attribute(
        &self,
        node: &str,
        a: &proto::AttributeProto,
    ) -> Result<Option<Attribute>, OnnxError> {
        let kind = if a.r#type != 0 {
            a.r#type
        } else if a.t.is_some() {
            at::TENSOR
        } else if !a.ints.is_empty() {
            at::INTS
        } else if !a.floats.is_empty() {
            at::FLOATS
        } else if !a.strings.is_empty() {
            at::STRINGS
        } else if !a.s.is_empty() {
            at::STRING
        } else if a.f != 0.0 {
            at::FLOAT
        } else {
            at::INT
        };
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        Ok(Some(match kind {
            at::FLOAT => Attribute::Float(f64::from(a.f)),
            at::INT => Attribute::Int(a.i),
            at::STRING => Attribute::String(text(&a.s)),
            at::FLOATS => Attribute::Floats(a.floats.iter().map(|&f| f64::from(f)).collect()),
            at::INTS => Attribute::Ints(a.ints.clone()),
            at::STRINGS => Attribute::Strings(a.strings.iter().map(|s| text(s)).collect()),
            at::TENSOR => {
                let Some(t) = &a.t else {
                    return Err(self.value_err(
                        node,
                        format!("attribute '{}' is a TENSOR without a tensor", a.name),
                    ));
                };
                let info = self.tensor(t, &format!("{node}.{}", a.name), |_| true)?;
                Attribute::Tensor(Tensor {
                    dtype: info.dtype,
                    dims: info.shape,
                    data: info
                        .data
                        .map_or(TensorData::Unknown, |d| d.to_tensor_data()),
                })
            }
            // Graphs, sparse tensors and type protos are not represented.
            _ => return Ok(None),
        }))
    }
}

/// The inference context of node `n` with its inputs' facts `ins` and its attributes.
fn node_ctx<'a>(
    n: &'a proto::NodeProto,
    ins: &'a [Option<&'a Info>],
    attrs: &'a BTreeMap<String, Attribute>,
    opset: i64,
    options: &ImportOptions,
) -> Ctx<'a> {
    Ctx {
        op: &n.op_type,
        domain: &n.domain,
        input_names: &n.input,
        inputs: ins,
        attrs,
        n_outputs: n.output.len(),
        opset,
        max_dim: options.max_dim,
    }
}

/// True when `op`'s output contents never decrease as the inputs in `slots` grow (on the
/// non-negative values shapes hold): folded values computed from upper bounds through such
/// an operator are upper bounds too.
fn monotone(op: &str, slots: &[usize]) -> bool {
    match op {
        // Every operand counts alike.
        "Concat" | "Min" | "Max" | "Add" | "Mul" | "Sum" => true,
        // Only in the data: a bounded index, axis, start or shape operand would pick other
        // elements, not larger ones. Div and Sub grow with the dividend / minuend only.
        "Shape" | "Size" | "Identity" | "Cast" | "Gather" | "Unsqueeze" | "Squeeze" | "Slice"
        | "Reshape" | "Flatten" | "Expand" | "Tile" | "Transpose" | "ReduceMax" | "ReduceMin"
        | "ReduceSum" | "ReduceProd" | "Ceil" | "Floor" | "Round" | "Sqrt" | "Relu" | "Clip"
        | "Div" | "Sub" => slots == [0],
        _ => false,
    }
}

/// A value computed from bounded values (`bounded`: the slots of the inputs that are, and
/// their names; `usize::MAX` for a value a control-flow body reads) is bounded too. Its
/// folded contents (a shape value holding the bound) stay only through operators that never
/// turn a larger input into a smaller output; any other leaves them unknown, so that no size
/// is ever planned below the real one.
fn inherit_bound(op: &str, bounded: &[(usize, String)], info: &mut Info) {
    let Some((_, first)) = bounded.first() else {
        return;
    };
    if info.bound.is_none() {
        info.bound = Some(format!("computed from the bounded value '{first}'"));
    }
    let slots: Vec<usize> = bounded.iter().map(|(s, _)| *s).collect();
    if info.data.is_some() && !monotone(op, &slots) {
        info.data = None;
    }
}

/// IEEE 754 half precision bits to `f64` (subnormals, infinities and NaN included).
fn half_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let frac = f64::from(h & 0x3ff);
    sign * match exp {
        0 => frac * 2f64.powi(-24),
        31 if frac == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        e => (1.0 + frac / 1024.0) * 2f64.powi(e - 15),
    }
}

/// The value a `Constant` node defines (opset 1..=19 attribute forms).
fn constant_value(node: &str, attrs: &BTreeMap<String, Attribute>) -> Result<Info, String> {
    let _ = node;
    if let Some((name, a)) = attrs.iter().next() {
        if attrs.len() != 1 {
            return Err(format!(
                "a Constant needs exactly one value attribute, found {}",
                attrs.len()
            ));
        }
        return Ok(match (name.as_str(), a) {
            ("value", Attribute::Tensor(t)) => Info::with_data(
                t.dtype,
                t.dims.clone(),
                Data::from_tensor_data(&t.data),
            ),
            ("value_int", Attribute::Int(v)) => Info::with_data(DType::Int64, vec![], Some(Data::Ints(vec![*v]))),
            ("value_ints", Attribute::Ints(v)) => {
                Info::with_data(DType::Int64, vec![v.len() as u64], Some(Data::Ints(v.clone())))
            }
            ("value_float", Attribute::Float(v)) => Info::with_data(DType::Float, vec![], Some(Data::Floats(vec![*v]))),
            ("value_floats", Attribute::Floats(v)) => {
                Info::with_data(DType::Float, vec![v.len() as u64], Some(Data::Floats(v.clone())))
            }
            (other, _) => return Err(format!("attribute '{other}' is not a supported Constant value (value, value_int(s), value_float(s))")),
        });
    }
    Err("a Constant needs a value attribute".into())
}

/// Imports a decoded model. See [`crate::import_bytes`] for the contract.
pub fn import_model(
    model: &ModelProto,
    source: &str,
    options: &ImportOptions,
) -> Result<Graph, OnnxError> {
    let imp = Importer { source };
    let g = model.graph.as_ref().ok_or_else(|| OnnxError::NoGraph {
        source_name: source.into(),
    })?;
    // Local functions are inlined first: their nodes are steps of the graph like any other.
    let inlined =
        crate::inline::inline_functions(model).map_err(|message| OnnxError::Function {
            source_name: source.into(),
            message,
        })?;
    let node_opsets: Option<&Vec<Option<i64>>> = inlined.as_ref().map(|(_, o)| o);
    let g = inlined.as_ref().map_or(g, |(g2, _)| g2);
    // Control flow: the outer values a sub-graph reads become extra inputs of its node.
    let implicit = control::add_implicit_inputs(g);
    let explicit: Option<&Vec<usize>> = implicit.as_ref().map(|(_, e)| e);
    let g = implicit.as_ref().map_or(g, |(g2, _)| g2);
    let opset = model
        .opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map_or(1, |o| o.version);
    // A node inlined from a function is inferred under the function's own default opset.
    let opset_of = |i: usize| -> i64 {
        node_opsets
            .and_then(|o| o.get(i).copied().flatten())
            .unwrap_or(opset)
    };

    let mut origin: HashMap<&str, Origin> = HashMap::new();
    let mut facts: HashMap<&str, Info> = HashMap::new();

    // Initialisers: shapes always, contents of small inline tensors (integer shape operands,
    // float scales of Resize, Range limits, …).
    for t in &g.initializer {
        if origin
            .insert(t.name.as_str(), Origin::Initializer)
            .is_some()
        {
            return Err(imp.value_err(&t.name, "two initialisers have this name"));
        }
        let info = imp.tensor(t, &t.name, |_| true)?;
        facts.insert(t.name.as_str(), info);
    }

    // Graph inputs that are not initialisers (old opsets list initialisers as inputs too).
    let mut used_shapes: BTreeSet<&str> = BTreeSet::new();
    let mut used_dims: BTreeSet<&str> = BTreeSet::new();
    let mut inputs = Vec::new();
    // A `--dim` must name a dim of some graph input (one used only by inputs whose shape
    // is overridden counts). Checked first, so that a misspelt name is reported as such,
    // not as the dim it failed to set.
    let all_params: BTreeSet<&str> = g
        .input
        .iter()
        .filter_map(|vi| vi.r#type.as_ref()?.tensor_type.as_ref()?.shape.as_ref())
        .flat_map(|s| s.dim.iter())
        .filter_map(|d| match &d.value {
            Some(DimensionValue::DimParam(p)) => Some(p.as_str()),
            _ => None,
        })
        .collect();
    if let Some(name) = options
        .dims
        .keys()
        .find(|k| !all_params.contains(k.as_str()))
    {
        return Err(OnnxError::UnusedOverride {
            source_name: source.into(),
            option: "dim",
            name: name.clone(),
            what: if all_params.is_empty() {
                "is not a named dim of any graph input (the inputs have no named dims)".to_string()
            } else {
                let names: Vec<&str> = all_params.iter().copied().collect();
                let suggestion = memplan::planner::did_you_mean(name, &names)
                    .map_or(String::new(), |s| format!("; did you mean '{s}'?"));
                format!(
                    "is not a named dim of any graph input (named dims: {}){suggestion}",
                    names.join(", ")
                )
            },
        });
    }

    for vi in &g.input {
        let name = vi.name.as_str();
        match origin.get(name) {
            Some(Origin::Initializer) => {
                // Old opsets list initialisers among the inputs; the declared type must be
                // the initialiser's, or the file contradicts itself.
                let init = &facts[name];
                let tt = vi.r#type.as_ref().and_then(|t| t.tensor_type.as_ref());
                if let Some(tt) = tt {
                    let declared: Option<Vec<i64>> = tt.shape.as_ref().map(|sp| {
                        sp.dim
                            .iter()
                            .map(|d| match &d.value {
                                Some(DimensionValue::DimValue(v)) => *v,
                                _ => -1,
                            })
                            .collect()
                    });
                    let shape_clash = declared.as_ref().is_some_and(|d| {
                        d.len() != init.shape.len()
                            || d.iter()
                                .zip(&init.shape)
                                .any(|(&a, &b)| a >= 0 && a as u64 != b)
                    });
                    let type_clash = tt.elem_type != 0 && tt.elem_type != init.dtype.onnx_code();
                    if shape_clash || type_clash {
                        return Err(imp.value_err(
                            name,
                            format!(
                                "it is a graph input declared as {} {:?} and an initialiser of {} {:?}; one name cannot be both (rename one, or make the input's type the initialiser's)",
                                DType::from_onnx_code(tt.elem_type).map_or("an unknown type".to_string(), |t| t.to_string()),
                                declared.unwrap_or_default(),
                                init.dtype,
                                init.shape
                            ),
                        ));
                    }
                }
                continue;
            }
            Some(_) => return Err(imp.value_err(name, "two graph inputs have this name")),
            None => {}
        }
        let tt = vi.r#type.as_ref().and_then(|t| t.tensor_type.as_ref());
        let Some(tt) = tt else {
            return Err(imp.value_err(name, "the graph input is not a tensor (sequence, map and optional inputs are not supported)"));
        };
        let dtype = imp.dtype(name, tt.elem_type)?;
        let shape = if let Some(s) = options.input_shapes.get(name) {
            used_shapes.insert(name);
            s.clone()
        } else {
            let Some(sp) = &tt.shape else {
                return Err(OnnxError::InputWithoutShape {
                    source_name: source.into(),
                    input: name.to_string(),
                });
            };
            let mut shape = Vec::with_capacity(sp.dim.len());
            for (i, d) in sp.dim.iter().enumerate() {
                let dim = match &d.value {
                    Some(DimensionValue::DimValue(v)) => u64::try_from(*v)
                        .map_err(|_| imp.value_err(name, format!("dim {i} is negative ({v})")))?,
                    Some(DimensionValue::DimParam(p)) if options.dims.contains_key(p.as_str()) => {
                        used_dims.insert(p.as_str());
                        options.dims[p.as_str()]
                    }
                    other => {
                        let param = match other {
                            Some(DimensionValue::DimParam(p)) if !p.is_empty() => Some(p.as_str()),
                            _ => None,
                        };
                        return Err(OnnxError::SymbolicDim {
                            source_name: source.into(),
                            input: name.to_string(),
                            dim: i,
                            param: param.map_or(String::new(), |p| format!(" ('{p}')")),
                            hint: param.map_or(String::new(), |p| format!(" or --dim {p}=<n>")),
                        });
                    }
                };
                shape.push(dim);
            }
            shape
        };
        if memplan_graph::ir::shape_bytes(dtype, &shape).is_none() {
            return Err(imp.value_err(
                name,
                format!("{dtype} {shape:?} overflows 64-bit byte counts"),
            ));
        }
        origin.insert(name, Origin::Input);
        facts.insert(name, Info::new(dtype, shape));
        inputs.push(name);
    }
    let input_names: Vec<&str> = inputs.clone();
    if let Some(name) = options
        .input_shapes
        .keys()
        .find(|k| !used_shapes.contains(k.as_str()))
    {
        return Err(OnnxError::UnusedOverride {
            source_name: source.into(),
            option: "input-shape",
            name: name.clone(),
            what: format!("is not a graph input (inputs: {})", input_names.join(", ")),
        });
    }
    // Node outputs: one definition each.
    let node_label = |i: usize| -> String {
        let n = &g.node[i];
        if n.name.is_empty() {
            format!("node_{i}")
        } else {
            n.name.clone()
        }
    };
    for (i, n) in g.node.iter().enumerate() {
        for (slot, out) in n.output.iter().enumerate() {
            if out.is_empty() {
                continue;
            }
            if let Some(prev) = origin.insert(out.as_str(), Origin::Node(i, slot)) {
                let what = match prev {
                    Origin::Input => "a graph input".to_string(),
                    Origin::Initializer => "an initialiser".to_string(),
                    Origin::Node(j, _) => format!("produced by node '{}'", node_label(j)),
                };
                return Err(OnnxError::Redefined {
                    source_name: source.into(),
                    node: node_label(i),
                    op: n.op_type.clone(),
                    value: out.clone(),
                    what,
                });
            }
        }
    }
    for (i, n) in g.node.iter().enumerate() {
        for (slot, inp) in n.input.iter().enumerate() {
            if !inp.is_empty() && !origin.contains_key(inp.as_str()) {
                return Err(OnnxError::DanglingInput {
                    source_name: source.into(),
                    node: node_label(i),
                    op: n.op_type.clone(),
                    slot,
                    value: inp.clone(),
                });
            }
        }
    }
    for out in &g.output {
        if !origin.contains_key(out.name.as_str()) {
            return Err(OnnxError::DanglingOutput {
                source_name: source.into(),
                value: out.name.clone(),
            });
        }
    }

    // Attributes of every node.
    let mut attrs: Vec<BTreeMap<String, Attribute>> = Vec::with_capacity(g.node.len());
    for (i, n) in g.node.iter().enumerate() {
        let mut map = BTreeMap::new();
        for a in &n.attribute {
            if let Some(v) = imp.attribute(&node_label(i), a)? {
                map.insert(a.name.clone(), v);
            }
        }
        attrs.push(map);
    }

    // Inference in dependency order: Kahn's algorithm, lowest file index first, so a file
    // already in topological order is processed in its own order.
    let deps: Vec<Vec<usize>> = g
        .node
        .iter()
        .map(|n| {
            let mut d: Vec<usize> = n
                .input
                .iter()
                .filter_map(|inp| match origin.get(inp.as_str()) {
                    Some(Origin::Node(j, _)) => Some(*j),
                    _ => None,
                })
                .collect();
            d.sort_unstable();
            d.dedup();
            d
        })
        .collect();
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); g.node.len()];
    let mut waiting: Vec<usize> = deps.iter().map(Vec::len).collect();
    for (i, d) in deps.iter().enumerate() {
        for &j in d {
            users[j].push(i);
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> = (0..g.node.len())
        .filter(|&i| waiting[i] == 0)
        .map(Reverse)
        .collect();
    let mut done = vec![false; g.node.len()];
    // What each control-flow node's bodies hold while it runs.
    let mut expansions: Vec<control::Expansion> = vec![control::Expansion::default(); g.node.len()];
    while let Some(Reverse(i)) = ready.pop() {
        done[i] = true;
        let n = &g.node[i];
        let fail = |message: String| OnnxError::Infer {
            source_name: source.into(),
            node: node_label(i),
            op: n.op_type.clone(),
            message,
        };
        // A control-flow node's own inputs; the outer values its bodies read follow them.
        let own = explicit.map_or(n.input.len(), |e| e[i]);
        let ins: Vec<Option<&Info>> = n.input[..own]
            .iter()
            .map(|inp| {
                if inp.is_empty() {
                    None
                } else {
                    facts.get(inp.as_str())
                }
            })
            .collect();
        let outs = if n.op_type == "Constant" && (n.domain.is_empty() || n.domain == "ai.onnx") {
            vec![constant_value(&node_label(i), &attrs[i]).map_err(fail)?]
        } else if control::is_control(n) {
            let outer = |name: &str| facts.get(name).cloned();
            control::infer(
                &imp,
                n,
                &ins,
                &outer,
                opset_of(i),
                options,
                &|name: &str| name.to_string(),
                &node_label(i),
                &mut expansions[i],
            )
            .map_err(fail)?
        } else {
            let ctx = node_ctx(n, &ins, &attrs[i], opset_of(i), options);
            match infer::infer_node(&ctx) {
                Ok(o) => o,
                Err(NodeError::Msg(m)) => return Err(fail(m)),
                Err(NodeError::Unsupported(why)) => {
                    return Err(OnnxError::UnknownOperator {
                        source_name: source.into(),
                        node: node_label(i),
                        op: n.op_type.clone(),
                        domain: if n.domain.is_empty() || n.domain == "ai.onnx" {
                            String::new()
                        } else {
                            format!(" in domain '{}'", n.domain)
                        },
                        why,
                    })
                }
            }
        };
        for (slot, out) in n.output.iter().enumerate() {
            if out.is_empty() {
                continue;
            }
            let Some(info) = outs.get(slot) else {
                return Err(fail(format!(
                    "the node has {} outputs but {} defines {}",
                    n.output.len(),
                    n.op_type,
                    outs.len()
                )));
            };
            let mut info = info.clone();
            let bounded: Vec<(usize, String)> = n
                .input
                .iter()
                .enumerate()
                .filter(|(_, inp)| facts.get(inp.as_str()).is_some_and(|f| f.bound.is_some()))
                .map(|(s, inp)| (s, inp.clone()))
                .collect();
            inherit_bound(&n.op_type, &bounded, &mut info);
            if info.dtype == DType::String {
                return Err(fail(format!(
                    "output '{out}' is a STRING tensor, which has no fixed size"
                )));
            }
            facts.insert(out.as_str(), info);
        }
        for &u in &users[i] {
            waiting[u] -= 1;
            if waiting[u] == 0 {
                ready.push(Reverse(u));
            }
        }
    }
    if let Some(start) = done.iter().position(|d| !d) {
        // Walk unfinished dependencies from an unfinished node until one repeats.
        let mut path = vec![start];
        let mut at = start;
        let cycle = loop {
            let Some(&next) = deps[at].iter().find(|&&j| !done[j]) else {
                break vec![at];
            };
            if let Some(p) = path.iter().position(|&x| x == next) {
                break path[p..].to_vec();
            }
            path.push(next);
            at = next;
        };
        // `path` follows "depends on"; print it in dataflow order.
        let mut names: Vec<String> = cycle
            .iter()
            .rev()
            .map(|&i| format!("'{}'", node_label(i)))
            .collect();
        if let Some(first) = names.first().cloned() {
            names.push(first);
        }
        return Err(OnnxError::Cycle {
            source_name: source.into(),
            cycle: names.join(" -> "),
        });
    }

    // Build the graph: inputs, initialisers, then node outputs, all in file order.
    let mut graph = Graph::new(if g.name.is_empty() {
        source
    } else {
        g.name.as_str()
    });
    let mut ids: HashMap<&str, ValueId> = HashMap::new();
    let add = |graph: &mut Graph,
               name: &str,
               info: &Info,
               kind: ValueKind|
     -> Result<ValueId, OnnxError> {
        let v = Value::with_shape(name, info.dtype, info.shape.clone(), kind).ok_or_else(|| {
            imp.value_err(
                name,
                format!(
                    "{} {:?} overflows 64-bit byte counts",
                    info.dtype, info.shape
                ),
            )
        })?;
        let id = graph.add_value(v).map_err(|e| imp.graph_err(e))?;
        if let Some(d) = &info.data {
            graph.set_data(id, Some(d.to_tensor_data()));
        }
        if let Some(why) = &info.bound {
            graph.set_bounded(id, why.clone());
        }
        Ok(id)
    };
    let mut input_ids = Vec::new();
    for &name in &inputs {
        let id = add(&mut graph, name, &facts[name], ValueKind::Input)?;
        ids.insert(name, id);
        input_ids.push(id);
    }
    for t in &g.initializer {
        let id = add(
            &mut graph,
            &t.name,
            &facts[t.name.as_str()],
            ValueKind::Weight,
        )?;
        ids.insert(t.name.as_str(), id);
    }
    for n in &g.node {
        let kind = if n.op_type == "Constant" {
            ValueKind::Constant
        } else {
            ValueKind::Activation
        };
        for out in n.output.iter().filter(|o| !o.is_empty()) {
            let id = add(&mut graph, out, &facts[out.as_str()], kind)?;
            ids.insert(out.as_str(), id);
        }
    }
    // Body values, after every value of the outer graph so that they never take an outer
    // name: a repeated name gets a `#k` suffix. `body_ids` maps their keys.
    let mut body_ids: HashMap<String, ValueId> = HashMap::new();
    for exp in &expansions {
        add_body_values(&mut graph, exp, &mut body_ids, &add)?;
    }
    let lookup = |key: &str| -> Option<ValueId> {
        if key.is_empty() {
            None
        } else if control::shown(key).len() < key.len() {
            body_ids.get(key).copied()
        } else {
            ids.get(key).copied()
        }
    };
    let mut names_taken: BTreeSet<String> = g.node.iter().map(|n| n.name.clone()).collect();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    // Control-flow windows: (the node, its body steps' first and last nodes, its closing
    // step), for the control edges that keep each window together in any order.
    let mut windows: Vec<Window> = Vec::new();
    for (i, (n, a)) in g.node.iter().zip(attrs).enumerate() {
        // Unique node names: empty ones become `node_<i>`, repeats get a suffix.
        let mut name = node_label(i);
        if !seen.insert(name.clone()) || (n.name.is_empty() && names_taken.contains(&name)) {
            let mut k = 1;
            while names_taken.contains(&format!("{name}#{k}")) {
                k += 1;
            }
            name = format!("{name}#{k}");
            seen.insert(name.clone());
        }
        names_taken.insert(name.clone());
        let inputs: Vec<Option<ValueId>> = n.input.iter().map(|inp| lookup(inp)).collect();
        // A Constant node stays in the node order (steps are numbered by file position) but
        // its value is a `Constant` without a producer, outside the activation arena.
        let mut outputs: Vec<ValueId> = if n.op_type == "Constant" {
            Vec::new()
        } else {
            n.output
                .iter()
                .filter_map(|o| ids.get(o.as_str()).copied())
                .collect()
        };
        let control = control::is_control(n);
        let exp = &expansions[i];
        let n_outputs = outputs.len();
        if control {
            // The node also writes its bodies' formal inputs.
            outputs.extend(
                exp.formals
                    .iter()
                    .filter_map(|(f, _)| body_ids.get(f).copied()),
            );
        }
        let id = graph
            .add_node(name.clone(), n.op_type.clone(), inputs, outputs, a)
            .map_err(|e| imp.graph_err(e))?;
        if !n.domain.is_empty() {
            graph.set_domain(id, n.domain.clone());
        }
        if control {
            let mut fresh = |base: String| -> String {
                let mut name = base.clone();
                let mut k = 1;
                while seen.contains(&name) || names_taken.contains(&name) {
                    name = format!("{base}#{k}");
                    k += 1;
                }
                seen.insert(name.clone());
                names_taken.insert(name.clone());
                name
            };
            add_body_nodes(
                &mut graph,
                &imp,
                id,
                n_outputs,
                &name,
                &n.op_type,
                exp,
                &lookup,
                &mut fresh,
                &mut windows,
            )?;
        }
    }
    // Each window runs as a whole: its body steps after the node, before the closing step,
    // and every reader of the node's outputs after the closing step.
    for w in &windows {
        let mut edges: Vec<(NodeId, NodeId)> = Vec::new();
        for &(first, last) in &w.children {
            edges.push((w.start, first));
            edges.push((last, w.end));
        }
        for &v in &graph.node(w.start).outputs[..w.n_outputs] {
            for &(reader, _) in &graph.value(v).consumers {
                if reader != w.end {
                    edges.push((w.end, reader));
                }
            }
        }
        for (from, to) in edges {
            graph
                .add_control_edge(from, to)
                .map_err(|e| imp.graph_err(e))?;
        }
    }
    graph.set_inputs(input_ids).map_err(|e| imp.graph_err(e))?;
    let outputs = g
        .output
        .iter()
        .filter_map(|o| ids.get(o.name.as_str()).copied())
        .collect();
    graph.set_outputs(outputs).map_err(|e| imp.graph_err(e))?;
    Ok(graph)
}

/// A control-flow node laid out as steps: the node, its body steps (each direct child as its
/// first and last node: a nested control-flow node spans its own window), the closing step.
struct Window {
    start: NodeId,
    /// The node's own outputs (its first outputs; the formal inputs follow).
    n_outputs: usize,
    children: Vec<(NodeId, NodeId)>,
    end: NodeId,
}

type AddValue<'a> = dyn Fn(&mut Graph, &str, &Info, ValueKind) -> Result<ValueId, OnnxError> + 'a;

/// Adds the values of `exp`'s bodies (formal inputs, weights, node outputs, nested bodies')
/// to `graph`, recording their ids by key in `ids`. A value whose name is taken (an outer
/// value named like it) gets a `#k` suffix.
fn add_body_values(
    graph: &mut Graph,
    exp: &control::Expansion,
    ids: &mut HashMap<String, ValueId>,
    add: &AddValue,
) -> Result<(), OnnxError> {
    let put = |graph: &mut Graph,
               ids: &mut HashMap<String, ValueId>,
               key: &str,
               info: &Info,
               kind: ValueKind| {
        let name = control::shown(key);
        let mut shown = name.to_string();
        let mut k = 1;
        while graph.value_by_name(&shown).is_some() {
            shown = format!("{name}#{k}");
            k += 1;
        }
        let id = add(graph, &shown, info, kind)?;
        ids.insert(key.to_string(), id);
        Ok::<(), OnnxError>(())
    };
    for (name, info) in &exp.formals {
        put(graph, ids, name, info, ValueKind::Activation)?;
    }
    for (name, info) in &exp.weights {
        put(graph, ids, name, info, ValueKind::Weight)?;
    }
    for node in &exp.nodes {
        let kind = if node.op == "Constant" {
            ValueKind::Constant
        } else {
            ValueKind::Activation
        };
        for (name, info) in &node.outputs {
            put(graph, ids, name, info, kind)?;
        }
        if let Some(inner) = &node.inner {
            add_body_values(graph, inner, ids, add)?;
        }
    }
    Ok(())
}

/// Adds the body steps of control-flow node `start` (named `name`, of operator `op`, its
/// first `n_outputs` outputs its own) and its closing step `<name>/end`, recording the
/// windows (nested ones first).
#[allow(clippy::too_many_arguments)]
fn add_body_nodes(
    graph: &mut Graph,
    imp: &Importer,
    start: NodeId,
    n_outputs: usize,
    name: &str,
    op: &str,
    exp: &control::Expansion,
    lookup: &dyn Fn(&str) -> Option<ValueId>,
    fresh: &mut dyn FnMut(String) -> String,
    windows: &mut Vec<Window>,
) -> Result<NodeId, OnnxError> {
    let mut children = Vec::with_capacity(exp.nodes.len());
    for node in &exp.nodes {
        let inputs: Vec<Option<ValueId>> = node.inputs.iter().map(|i| lookup(i)).collect();
        let mut outputs: Vec<ValueId> = if node.op == "Constant" {
            Vec::new()
        } else {
            node.outputs.iter().filter_map(|(o, _)| lookup(o)).collect()
        };
        let own = outputs.len();
        if let Some(inner) = &node.inner {
            outputs.extend(inner.formals.iter().filter_map(|(f, _)| lookup(f)));
        }
        let node_name = fresh(node.name.clone());
        let id = graph
            .add_node(
                node_name.clone(),
                node.op.clone(),
                inputs,
                outputs,
                node.attrs.clone(),
            )
            .map_err(|e| imp.graph_err(e))?;
        if !node.domain.is_empty() {
            graph.set_domain(id, node.domain.clone());
        }
        let last = match &node.inner {
            Some(inner) => add_body_nodes(
                graph, imp, id, own, &node_name, &node.op, inner, lookup, fresh, windows,
            )?,
            None => id,
        };
        children.push((id, last));
    }
    let mut reads: Vec<Option<ValueId>> = Vec::new();
    let own_outputs = graph.node(start).outputs[..n_outputs].to_vec();
    for v in exp
        .end_reads
        .iter()
        .filter_map(|r| lookup(r))
        .chain(own_outputs)
    {
        if !reads.contains(&Some(v)) {
            reads.push(Some(v));
        }
    }
    let end = graph
        .add_node(
            fresh(format!("{name}/end")),
            format!("{op}End"),
            reads,
            Vec::new(),
            BTreeMap::new(),
        )
        .map_err(|e| imp.graph_err(e))?;
    windows.push(Window {
        start,
        n_outputs,
        children,
        end,
    });
    Ok(end)
}
