//! Shape and type inference for one node at a time, with constant folding of small
//! tensors (shape sub-graphs such as `Shape → Gather → Unsqueeze → Concat → Reshape`).
//!
//! [`infer_node`] takes the node's inputs as [`Info`] (dtype, static shape, contents when
//! known) and returns one [`Info`] per output. Contents are folded only for tensors of at
//! most [`MAX_FOLD_ELEMENTS`] elements; larger or data-dependent values keep `data: None`.
//! An operator whose output shape depends on contents that are not known (a `Reshape`
//! whose shape operand cannot be folded) fails with a message naming that input.
//!
//! All dimension arithmetic is checked (`i128` intermediates, checked `u64` products); no
//! input makes this module panic.

use std::collections::BTreeMap;

use memplan_graph::{Attribute, DType};

use crate::fold::{self, Data};
use crate::ops;

mod contrib;
mod extra;
mod quant;

/// Tensors with more elements than this are never folded (their contents are not computed).
pub const MAX_FOLD_ELEMENTS: u64 = 4096;

/// What is known about a value: element type, static shape, contents (small tensors only).
#[derive(Clone, Debug, PartialEq)]
pub struct Info {
    pub dtype: DType,
    pub shape: Vec<u64>,
    /// Row-major contents; when present its length equals the shape's element count.
    pub data: Option<Data>,
    /// When the real size depends on runtime values (NonZero, NonMaxSuppression, …): why
    /// `shape` is an upper bound and where the bound comes from. `None` for exact shapes.
    pub bound: Option<String>,
}

impl Info {
    /// A value with a shape and unknown contents.
    pub fn new(dtype: DType, shape: Vec<u64>) -> Info {
        Info {
            dtype,
            shape,
            data: None,
            bound: None,
        }
    }

    /// A value whose `shape` is an upper bound of a data-dependent size, `why` saying so.
    pub fn bounded(dtype: DType, shape: Vec<u64>, why: impl Into<String>) -> Info {
        Info {
            dtype,
            shape,
            data: None,
            bound: Some(why.into()),
        }
    }

    /// A value with known contents; contents that do not fit the shape, or have more than
    /// [`MAX_FOLD_ELEMENTS`] elements, are dropped (so no chain of nodes copies large data).
    pub fn with_data(dtype: DType, shape: Vec<u64>, data: Option<Data>) -> Info {
        let data = data.filter(|d| {
            d.len() as u64 <= MAX_FOLD_ELEMENTS && Some(d.len() as u64) == elements(&shape)
        });
        Info {
            dtype,
            shape,
            data,
            bound: None,
        }
    }

    fn ints(&self) -> Option<&[i64]> {
        match &self.data {
            Some(Data::Ints(v)) => Some(v),
            _ => None,
        }
    }
}

/// Number of elements of a shape, `None` on overflow.
pub fn elements(shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))
}

/// Why a node could not be inferred; the importer adds file, node and operator names.
#[derive(Debug, PartialEq)]
pub enum NodeError {
    /// The operator is not supported; the text says why or what is missing.
    Unsupported(String),
    /// Anything else, in words naming the input, attribute or dim at fault.
    Msg(String),
}

type R<T> = Result<T, NodeError>;

fn msg<T>(text: impl Into<String>) -> R<T> {
    Err(NodeError::Msg(text.into()))
}

/// One node as inference sees it.
pub struct Ctx<'a> {
    pub op: &'a str,
    /// The node's domain: `""` (default, also for `"ai.onnx"`) or e.g. `"com.microsoft"`.
    pub domain: &'a str,
    /// Input names by slot (`""` for an omitted optional input).
    pub input_names: &'a [String],
    /// Input facts by slot; `None` for an omitted optional input.
    pub inputs: &'a [Option<&'a Info>],
    pub attrs: &'a BTreeMap<String, Attribute>,
    pub n_outputs: usize,
    /// Version of the default operator set the model imports.
    pub opset: i64,
    /// Upper bound for a data-dependent dim the graph does not bound (`--max-dim`).
    pub max_dim: Option<u64>,
}

impl<'a> Ctx<'a> {
    fn name(&self, slot: usize) -> &str {
        self.input_names.get(slot).map(String::as_str).unwrap_or("")
    }

    /// A required input.
    fn input(&self, slot: usize) -> R<&'a Info> {
        match self.inputs.get(slot).copied().flatten() {
            Some(info) => Ok(info),
            None => msg(format!(
                "input {slot} is missing; {} needs it (the node has {} inputs)",
                self.op,
                self.inputs.len()
            )),
        }
    }

    fn opt_input(&self, slot: usize) -> Option<&'a Info> {
        self.inputs.get(slot).copied().flatten()
    }

    /// A required integer input whose contents must be known at import time.
    fn ints_input(&self, slot: usize, what: &str) -> R<Vec<i64>> {
        let info = self.input(slot)?;
        match &info.data {
            Some(Data::Ints(v)) => Ok(v.clone()),
            Some(Data::Floats(_)) => msg(format!(
                "input {slot} '{}' ({what}) must be an integer tensor, found {}",
                self.name(slot),
                info.dtype
            )),
            None => msg(unknown_contents(slot, self.name(slot), what, info)),
        }
    }

    /// A required float-or-integer input whose contents must be known, as `f64`.
    fn floats_input(&self, slot: usize, what: &str) -> R<Vec<f64>> {
        let info = self.input(slot)?;
        match &info.data {
            Some(Data::Floats(v)) => Ok(v.clone()),
            Some(Data::Ints(v)) => Ok(v.iter().map(|&x| x as f64).collect()),
            None => msg(unknown_contents(slot, self.name(slot), what, info)),
        }
    }

    fn attr_int(&self, name: &str, default: i64) -> R<i64> {
        match self.attrs.get(name) {
            None => Ok(default),
            Some(Attribute::Int(v)) => Ok(*v),
            Some(other) => msg(format!(
                "attribute '{name}' must be an int, found {other:?}"
            )),
        }
    }

    fn attr_ints(&self, name: &str) -> R<Option<Vec<i64>>> {
        match self.attrs.get(name) {
            None => Ok(None),
            Some(Attribute::Ints(v)) => Ok(Some(v.clone())),
            Some(Attribute::Int(v)) => Ok(Some(vec![*v])),
            Some(other) => msg(format!(
                "attribute '{name}' must be a list of ints, found {other:?}"
            )),
        }
    }

    fn attr_floats(&self, name: &str) -> R<Option<Vec<f64>>> {
        match self.attrs.get(name) {
            None => Ok(None),
            Some(Attribute::Floats(v)) => Ok(Some(v.clone())),
            Some(Attribute::Float(v)) => Ok(Some(vec![*v])),
            Some(other) => msg(format!(
                "attribute '{name}' must be a list of floats, found {other:?}"
            )),
        }
    }

    fn attr_string(&self, name: &str, default: &str) -> R<String> {
        match self.attrs.get(name) {
            None => Ok(default.to_string()),
            Some(Attribute::String(s)) => Ok(s.clone()),
            Some(other) => msg(format!(
                "attribute '{name}' must be a string, found {other:?}"
            )),
        }
    }

    /// `axis` (possibly negative) as an index into `rank` dims.
    fn axis(&self, what: &str, axis: i64, rank: usize) -> R<usize> {
        normalize_axis(axis, rank).ok_or_else(|| {
            NodeError::Msg(format!(
                "{what} {axis} is out of range for rank {rank} (valid: -{rank}..{})",
                rank as i64 - 1
            ))
        })
    }

    /// Normalised, distinct axes (linear time: files may hold long lists).
    fn axes(&self, what: &str, axes: &[i64], rank: usize) -> R<Vec<usize>> {
        let mut out = Vec::with_capacity(axes.len());
        let mut seen = vec![false; rank];
        for &a in axes {
            let a = self.axis(what, a, rank)?;
            if std::mem::replace(&mut seen[a], true) {
                return msg(format!("{what} {a} is repeated"));
            }
            out.push(a);
        }
        Ok(out)
    }
}

/// Why an input's contents, needed for the output shape, are not known.
fn unknown_contents(slot: usize, name: &str, what: &str, info: &Info) -> String {
    match elements(&info.shape) {
        Some(n) if n <= MAX_FOLD_ELEMENTS => format!(
            "input {slot} '{name}' ({what}) is not known at import time, so the output shape cannot be computed; it must be an initialiser, a Constant or a foldable shape computation"
        ),
        n => format!(
            "input {slot} '{name}' ({what}) has {} elements, more than the {MAX_FOLD_ELEMENTS} whose contents memplan keeps, so the output shape cannot be computed",
            n.map_or("too many".to_string(), |n| n.to_string())
        ),
    }
}

/// `mask[i]` is true when `i` is one of `axes` (all below `rank`).
fn axis_mask(axes: &[usize], rank: usize) -> Vec<bool> {
    let mut mask = vec![false; rank];
    for &a in axes {
        if let Some(m) = mask.get_mut(a) {
            *m = true;
        }
    }
    mask
}

/// `axis` in `-rank..rank` as an index.
pub fn normalize_axis(axis: i64, rank: usize) -> Option<usize> {
    let r = i64::try_from(rank).ok()?;
    let a = if axis < 0 { axis.checked_add(r)? } else { axis };
    if (0..r).contains(&a) {
        usize::try_from(a).ok()
    } else {
        None
    }
}

fn to_dim(v: i128, what: &str) -> R<u64> {
    u64::try_from(v).map_err(|_| {
        NodeError::Msg(if v < 0 {
            format!("{what} is negative ({v})")
        } else {
            format!("{what} ({v}) is too large")
        })
    })
}

fn checked_dim_mul(a: u64, b: u64, what: &str) -> R<u64> {
    a.checked_mul(b)
        .ok_or_else(|| NodeError::Msg(format!("{what} overflows ({a} x {b})")))
}

fn fmt_shape(shape: &[u64]) -> String {
    if shape.is_empty() {
        return "[] (scalar)".to_string();
    }
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", dims.join(", "))
}

/// Numpy broadcasting of several shapes; the error names the inputs (by slot) that clash.
pub fn broadcast(shapes: &[(usize, &[u64])]) -> Result<Vec<u64>, String> {
    let rank = shapes.iter().map(|(_, s)| s.len()).max().unwrap_or(0);
    let mut out = vec![1u64; rank];
    let mut from: Vec<Option<usize>> = vec![None; rank];
    for &(slot, shape) in shapes {
        let offset = rank - shape.len();
        for (i, &d) in shape.iter().enumerate() {
            let o = &mut out[offset + i];
            if d == *o || d == 1 {
                continue;
            }
            if *o == 1 {
                *o = d;
                from[offset + i] = Some(slot);
            } else {
                let other = from[offset + i].unwrap_or(0);
                return Err(format!(
                    "inputs {other} and {slot} cannot be broadcast: dim {} (from the right) is {} in one and {d} in the other; numpy broadcasting needs equal dims or 1",
                    rank - offset - i, *o
                ));
            }
        }
    }
    Ok(out)
}

/// Infers one node's outputs from its inputs.
///
/// The operator must be in the registry ([`crate::ops`]); one outside it is
/// [`NodeError::Unsupported`]. Operators of the `com.microsoft` domain go to
/// `contrib::infer`.
pub fn infer_node(ctx: &Ctx) -> R<Vec<Info>> {
    let domain = ops::canonical_domain(ctx.domain);
    if !ops::is_supported(domain, ctx.op) {
        return Err(NodeError::Unsupported(if domain.is_empty() {
            "no shape inference is implemented for it".to_string()
        } else if domain == ops::MICROSOFT {
            "no shape inference is implemented for this onnxruntime contrib operator".to_string()
        } else {
            "memplan infers the default ONNX domain and com.microsoft only".to_string()
        }));
    }
    if domain == ops::MICROSOFT {
        return contrib::infer(ctx);
    }
    if let Some(outs) = extra::infer(ctx)? {
        return Ok(outs);
    }
    let outs = match ctx.op {
        // Elementwise unary: same type and shape.
        "Sigmoid"
        | "Tanh"
        | "Erf"
        | "Gelu"
        | "Softmax"
        | "LogSoftmax"
        | "Hardmax"
        | "Sin"
        | "Cos"
        | "Tan"
        | "Asin"
        | "Acos"
        | "Atan"
        | "Sinh"
        | "Cosh"
        | "Asinh"
        | "Acosh"
        | "Atanh"
        | "LeakyRelu"
        | "Elu"
        | "Selu"
        | "Celu"
        | "HardSigmoid"
        | "HardSwish"
        | "Softplus"
        | "Softsign"
        | "Mish"
        | "ThresholdedRelu"
        | "Shrink"
        | "LRN"
        | "InstanceNormalization"
        | "GroupNormalization"
        | "MeanVarianceNormalization"
        | "CumSum"
        | "Trilu"
        | "BitwiseNot"
        | "PRelu"
        | "ScatterND"
        | "ScatterElements"
        | "Scatter"
        | "RandomNormalLike"
        | "RandomUniformLike" => {
            let x = ctx.input(0)?;
            vec![Info::new(x.dtype, x.shape.clone())]
        }
        "Identity" | "Neg" | "Abs" | "Sqrt" | "Floor" | "Ceil" | "Not" | "Reciprocal" | "Round"
        | "Sign" | "Exp" | "Log" | "Relu" => {
            let x = ctx.input(0)?;
            let data = x.data.as_ref().and_then(|d| fold::unary(ctx.op, d));
            vec![Info::with_data(x.dtype, x.shape.clone(), data)]
        }
        "Clip" => {
            let x = ctx.input(0)?;
            let data = x.data.as_ref().and_then(|d| {
                if ctx.opset < 11 {
                    let lo = ctx.attr_floats("min").ok().flatten().map(Data::Floats);
                    let hi = ctx.attr_floats("max").ok().flatten().map(Data::Floats);
                    fold::clip(d, lo.as_ref(), hi.as_ref())
                } else {
                    let bound = |slot: usize| match ctx.opt_input(slot) {
                        None => Some(None),
                        Some(b) => b.data.as_ref().map(Some),
                    };
                    fold::clip(d, bound(1)?, bound(2)?)
                }
            });
            vec![Info::with_data(x.dtype, x.shape.clone(), data)]
        }
        "IsNaN" | "IsInf" => vec![Info::new(DType::Bool, ctx.input(0)?.shape.clone())],
        "Dropout" => {
            let x = ctx.input(0)?;
            vec![
                Info::with_data(x.dtype, x.shape.clone(), x.data.clone()),
                Info::new(DType::Bool, x.shape.clone()),
            ]
        }
        "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Mod" | "Max" | "Min" | "Sum" | "Mean"
        | "BitShift" | "BitwiseAnd" | "BitwiseOr" | "BitwiseXor" => elementwise(ctx, None)?,
        "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" | "And" | "Or" | "Xor" => {
            elementwise(ctx, Some(DType::Bool))?
        }
        "Where" => where_(ctx)?,
        "MatMul" => vec![matmul(ctx)?],
        "Gemm" => vec![gemm(ctx)?],
        "Conv" => vec![conv(ctx)?],
        "ConvTranspose" => vec![conv_transpose(ctx)?],
        "MaxPool" | "AveragePool" | "LpPool" => pool(ctx)?,
        "GlobalAveragePool" | "GlobalMaxPool" | "GlobalLpPool" => {
            let x = ctx.input(0)?;
            if x.shape.len() < 2 {
                return msg(format!(
                    "input 0 '{}' has shape {}; {} needs (N, C, spatial...)",
                    ctx.name(0),
                    fmt_shape(&x.shape),
                    ctx.op
                ));
            }
            let mut shape = x.shape.clone();
            shape[2..].iter_mut().for_each(|d| *d = 1);
            vec![Info::new(x.dtype, shape)]
        }
        "BatchNormalization" => {
            let x = ctx.input(0)?;
            let c = x.shape.get(1).copied().unwrap_or(1);
            let mut outs = vec![Info::new(x.dtype, x.shape.clone())];
            for _ in 1..ctx.n_outputs {
                outs.push(Info::new(x.dtype, vec![c]));
            }
            outs
        }
        "LayerNormalization" => layer_norm(ctx)?,
        "Concat" => vec![concat(ctx)?],
        "Split" => split(ctx)?,
        "Slice" => vec![slice(ctx)?],
        "Gather" => vec![gather(ctx)?],
        "GatherElements" => {
            let x = ctx.input(0)?;
            vec![Info::new(x.dtype, ctx.input(1)?.shape.clone())]
        }
        "Transpose" => vec![transpose(ctx)?],
        "Reshape" => vec![reshape(ctx)?],
        "Flatten" => vec![flatten(ctx)?],
        "Squeeze" => vec![squeeze(ctx)?],
        "Unsqueeze" => vec![unsqueeze(ctx)?],
        "Expand" => vec![expand(ctx)?],
        "Pad" => vec![pad(ctx)?],
        "Resize" | "Upsample" => vec![resize(ctx)?],
        "ReduceSum" | "ReduceMean" | "ReduceMax" | "ReduceMin" | "ReduceProd" | "ReduceL1"
        | "ReduceL2" | "ReduceLogSum" | "ReduceLogSumExp" | "ReduceSumSquare" => {
            vec![reduce(ctx)?]
        }
        "ArgMax" | "ArgMin" => {
            let x = ctx.input(0)?;
            let axis = ctx.axis("axis", ctx.attr_int("axis", 0)?, x.shape.len())?;
            let keep = ctx.attr_int("keepdims", 1)? != 0;
            vec![Info::new(
                DType::Int64,
                reduce_shape(&x.shape, &[axis], keep),
            )]
        }
        "Cast" => {
            let x = ctx.input(0)?;
            let to = ctx.attr_int("to", 0)?;
            let dtype = i32::try_from(to)
                .ok()
                .and_then(DType::from_onnx_code)
                .ok_or_else(|| {
                    NodeError::Msg(format!(
                        "attribute 'to' is {to}, not a known TensorProto.DataType"
                    ))
                })?;
            let data = x.data.as_ref().and_then(|d| fold::cast(d, dtype));
            vec![Info::with_data(dtype, x.shape.clone(), data)]
        }
        "CastLike" => {
            let x = ctx.input(0)?;
            let dtype = ctx.input(1)?.dtype;
            let data = x.data.as_ref().and_then(|d| fold::cast(d, dtype));
            vec![Info::with_data(dtype, x.shape.clone(), data)]
        }
        "Shape" => vec![shape_op(ctx)?],
        "Size" => {
            let x = ctx.input(0)?;
            let n = elements(&x.shape)
                .and_then(|n| i64::try_from(n).ok())
                .ok_or_else(|| NodeError::Msg("input 0's element count overflows".into()))?;
            vec![Info::with_data(
                DType::Int64,
                vec![],
                Some(Data::Ints(vec![n])),
            )]
        }
        "ConstantOfShape" => vec![constant_of_shape(ctx)?],
        "Range" => vec![range(ctx)?],
        "Tile" => vec![tile(ctx)?],
        "DepthToSpace" | "SpaceToDepth" => vec![depth_space(ctx)?],
        "Einsum" => vec![einsum(ctx)?],
        "If" | "Loop" | "Scan" => {
            return msg("control flow is inferred by the importer, which holds the sub-graphs")
        }
        "Constant" => return msg("Constant nodes are read by the importer"),
        _ => {
            return Err(NodeError::Unsupported(
                "it is listed in memplan_onnx::ops but has no shape rule (a memplan bug)".into(),
            ))
        }
    };
    Ok(outs)
}

fn elementwise(ctx: &Ctx, out_dtype: Option<DType>) -> R<Vec<Info>> {
    let first = ctx.input(0)?;
    let mut shapes = Vec::new();
    let mut infos = Vec::new();
    for slot in 0..ctx.inputs.len() {
        let info = ctx.input(slot)?;
        shapes.push((slot, info.shape.as_slice()));
        infos.push(info);
    }
    let shape = broadcast(&shapes).map_err(NodeError::Msg)?;
    let dtype = out_dtype.unwrap_or(first.dtype);
    let data = if infos.len() == 2 {
        fold::binary(ctx.op, infos[0], infos[1], &shape, dtype)
    } else if infos.len() > 2 && matches!(ctx.op, "Max" | "Min" | "Sum") {
        // Fold pairwise, left to right (Sum adds like Add).
        let op = if ctx.op == "Sum" { "Add" } else { ctx.op };
        infos[1..]
            .iter()
            .try_fold(
                Info::with_data(first.dtype, first.shape.clone(), first.data.clone()),
                |acc, next| {
                    let s = broadcast(&[(0, &acc.shape), (1, &next.shape)]).ok()?;
                    let d = fold::binary(op, &acc, next, &s, dtype)?;
                    Some(Info::with_data(dtype, s, Some(d)))
                },
            )
            .and_then(|i| i.data)
    } else if infos.len() == 1 {
        first.data.clone()
    } else {
        None
    };
    Ok(vec![Info::with_data(dtype, shape, data)])
}

fn where_(ctx: &Ctx) -> R<Vec<Info>> {
    let c = ctx.input(0)?;
    let x = ctx.input(1)?;
    let y = ctx.input(2)?;
    let shape =
        broadcast(&[(0, &c.shape), (1, &x.shape), (2, &y.shape)]).map_err(NodeError::Msg)?;
    let data = fold::where_(c, x, y, &shape);
    Ok(vec![Info::with_data(x.dtype, shape, data)])
}

fn matmul(ctx: &Ctx) -> R<Info> {
    Ok(Info::new(ctx.input(0)?.dtype, matmul_at(ctx, 0, 1)?))
}

/// `MatMul`'s output shape for the inputs in slots `sa` and `sb` (also used by the
/// quantized and fused variants, whose operands sit in other slots).
fn matmul_at(ctx: &Ctx, slot_a: usize, slot_b: usize) -> R<Vec<u64>> {
    let a = ctx.input(slot_a)?;
    let b = ctx.input(slot_b)?;
    if a.shape.is_empty() || b.shape.is_empty() {
        return msg(format!(
            "MatMul needs inputs of rank 1 or more, got {} and {}",
            fmt_shape(&a.shape),
            fmt_shape(&b.shape)
        ));
    }
    let sa: Vec<u64> = if a.shape.len() == 1 {
        vec![1, a.shape[0]]
    } else {
        a.shape.clone()
    };
    let sb: Vec<u64> = if b.shape.len() == 1 {
        vec![b.shape[0], 1]
    } else {
        b.shape.clone()
    };
    let (ra, rb) = (sa.len(), sb.len());
    let k_a = sa[ra - 1];
    let k_b = sb[rb - 2];
    if k_a != k_b {
        return msg(format!(
            "inner dims differ: input {slot_a} '{}' {} has {k_a} columns but input {slot_b} '{}' {} has {k_b} rows",
            ctx.name(slot_a),
            fmt_shape(&a.shape),
            ctx.name(slot_b),
            fmt_shape(&b.shape)
        ));
    }
    let mut shape = broadcast(&[(0, &sa[..ra - 2]), (1, &sb[..rb - 2])]).map_err(NodeError::Msg)?;
    if a.shape.len() > 1 {
        shape.push(sa[ra - 2]);
    }
    if b.shape.len() > 1 {
        shape.push(sb[rb - 1]);
    }
    Ok(shape)
}

fn gemm(ctx: &Ctx) -> R<Info> {
    Ok(Info::new(ctx.input(0)?.dtype, gemm_at(ctx, 0, 1)?))
}

/// `Gemm`'s `[M, N]` for the operands in slots `slot_a` and `slot_b` (transA, transB).
fn gemm_at(ctx: &Ctx, slot_a: usize, slot_b: usize) -> R<Vec<u64>> {
    let a = ctx.input(slot_a)?;
    let b = ctx.input(slot_b)?;
    if a.shape.len() != 2 || b.shape.len() != 2 {
        return msg(format!(
            "{} needs 2-D operands, got input {slot_a} '{}' {} and input {slot_b} '{}' {}",
            ctx.op,
            ctx.name(slot_a),
            fmt_shape(&a.shape),
            ctx.name(slot_b),
            fmt_shape(&b.shape)
        ));
    }
    let ta = ctx.attr_int("transA", 0)? != 0;
    let tb = ctx.attr_int("transB", 0)? != 0;
    let (m, ka) = if ta {
        (a.shape[1], a.shape[0])
    } else {
        (a.shape[0], a.shape[1])
    };
    let (kb, n) = if tb {
        (b.shape[1], b.shape[0])
    } else {
        (b.shape[0], b.shape[1])
    };
    if ka != kb {
        return msg(format!(
            "inner dims differ: A{} gives K = {ka}, B{} gives K = {kb} (transA = {}, transB = {})",
            fmt_shape(&a.shape),
            fmt_shape(&b.shape),
            ta as u8,
            tb as u8
        ));
    }
    Ok(vec![m, n])
}

/// Per-spatial-dim window parameters of Conv and the pools.
struct Window {
    kernel: Vec<u64>,
    strides: Vec<u64>,
    dilations: Vec<u64>,
    /// `(begin, end)` per spatial dim.
    pads: Vec<(i64, i64)>,
    auto_pad: String,
}

fn window(ctx: &Ctx, spatial: usize, kernel: Vec<u64>) -> R<Window> {
    let positive = |name: &str| -> R<Vec<u64>> {
        match ctx.attr_ints(name)? {
            None => Ok(vec![1; spatial]),
            Some(v) if v.len() == spatial => v
                .iter()
                .map(|&s| {
                    u64::try_from(s).ok().filter(|&s| s > 0).ok_or_else(|| {
                        NodeError::Msg(format!("attribute '{name}' has {s}; it must be positive"))
                    })
                })
                .collect(),
            Some(v) => msg(format!(
                "attribute '{name}' has {} values but the input has {spatial} spatial dims",
                v.len()
            )),
        }
    };
    let strides = positive("strides")?;
    let dilations = positive("dilations")?;
    let pads = match ctx.attr_ints("pads")? {
        None => vec![(0, 0); spatial],
        Some(p) if p.len() == 2 * spatial => (0..spatial).map(|i| (p[i], p[i + spatial])).collect(),
        Some(p) => {
            return msg(format!(
                "attribute 'pads' has {} values; it needs 2 x {spatial} (begins then ends)",
                p.len()
            ))
        }
    };
    if kernel.len() != spatial {
        return msg(format!(
            "kernel has {} dims but the input has {spatial} spatial dims",
            kernel.len()
        ));
    }
    if let Some(i) = kernel.iter().position(|&k| k == 0) {
        return msg(format!(
            "kernel dim {i} is 0 (kernel {kernel:?}); every kernel dim must be at least 1"
        ));
    }
    let auto_pad = ctx.attr_string("auto_pad", "NOTSET")?;
    Ok(Window {
        kernel,
        strides,
        dilations,
        pads,
        auto_pad,
    })
}

/// Output size of a sliding window along one dim (Conv and pools).
fn window_out(w: &Window, i: usize, input: u64, ceil_mode: bool) -> R<u64> {
    let k = i128::from(w.kernel[i]);
    let s = i128::from(w.strides[i]);
    let d = i128::from(w.dilations[i]);
    let n = i128::from(input);
    let ek = (k - 1).max(0) * d + 1;
    let out = match w.auto_pad.as_str() {
        "SAME_UPPER" | "SAME_LOWER" => (n + s - 1) / s,
        "VALID" => {
            if n < ek {
                return msg(format!(
                    "spatial dim {i}: input size {n} is smaller than the dilated kernel ({ek})"
                ));
            }
            (n - ek) / s + 1
        }
        "NOTSET" | "" => {
            let (pb, pe) = w.pads[i];
            let padded = n + i128::from(pb) + i128::from(pe);
            if padded < ek {
                return msg(format!(
                    "spatial dim {i}: padded input size {padded} is smaller than the dilated kernel ({ek})"
                ));
            }
            let span = padded - ek;
            if ceil_mode {
                let mut out = (span + s - 1) / s + 1;
                // The last window must start inside the input or its begin padding.
                if (out - 1) * s >= n + i128::from(pb) {
                    out -= 1;
                }
                out
            } else {
                span / s + 1
            }
        }
        other => {
            return msg(format!(
            "attribute 'auto_pad' is '{other}'; expected NOTSET, SAME_UPPER, SAME_LOWER or VALID"
        ))
        }
    };
    to_dim(out, &format!("output spatial dim {i}"))
}

fn conv(ctx: &Ctx) -> R<Info> {
    Ok(Info::new(ctx.input(0)?.dtype, conv_at(ctx, 0, 1)?))
}

/// `Conv`'s output shape for the data in slot `slot_x` and the weight in `slot_w` (also the
/// quantized and fused convolutions).
fn conv_at(ctx: &Ctx, slot_x: usize, slot_w: usize) -> R<Vec<u64>> {
    let x = ctx.input(slot_x)?;
    let w = ctx.input(slot_w)?;
    if x.shape.len() < 3 || w.shape.len() != x.shape.len() {
        return msg(format!(
            "input {slot_x} '{}' {} and weight (input {slot_w} '{}') {} must both be (N, C, spatial...) and (M, C/group, kernel...) of the same rank",
            ctx.name(slot_x),
            fmt_shape(&x.shape),
            ctx.name(slot_w),
            fmt_shape(&w.shape)
        ));
    }
    let spatial = x.shape.len() - 2;
    let group = ctx.attr_int("group", 1)?;
    let group = u64::try_from(group)
        .ok()
        .filter(|&g| g > 0)
        .ok_or_else(|| {
            NodeError::Msg(format!("attribute 'group' is {group}; it must be positive"))
        })?;
    if x.shape[1] != checked_dim_mul(w.shape[1], group, "C/group x group")? {
        return msg(format!(
            "input {slot_x} '{}' has {} channels but weight '{}' {} with group = {group} expects {} x {group}",
            ctx.name(slot_x),
            x.shape[1],
            ctx.name(slot_w),
            fmt_shape(&w.shape),
            w.shape[1]
        ));
    }
    let kernel = match ctx.attr_ints("kernel_shape")? {
        Some(k) => k
            .iter()
            .map(|&v| to_dim(i128::from(v), "kernel_shape"))
            .collect::<R<Vec<u64>>>()?,
        None => w.shape[2..].to_vec(),
    };
    let win = window(ctx, spatial, kernel)?;
    let mut shape = vec![x.shape[0], w.shape[0]];
    for i in 0..spatial {
        shape.push(window_out(&win, i, x.shape[2 + i], false)?);
    }
    Ok(shape)
}

fn conv_transpose(ctx: &Ctx) -> R<Info> {
    let x = ctx.input(0)?;
    let w = ctx.input(1)?;
    if x.shape.len() < 3 || w.shape.len() != x.shape.len() {
        return msg(format!(
            "input 0 '{}' {} and weight (input 1 '{}') {} must both be (N, C, spatial...) and (C, M/group, kernel...) of the same rank",
            ctx.name(0),
            fmt_shape(&x.shape),
            ctx.name(1),
            fmt_shape(&w.shape)
        ));
    }
    let spatial = x.shape.len() - 2;
    let group = u64::try_from(ctx.attr_int("group", 1)?)
        .ok()
        .filter(|&g| g > 0)
        .ok_or_else(|| NodeError::Msg("attribute 'group' must be positive".into()))?;
    let m = checked_dim_mul(w.shape[1], group, "output channels")?;
    let kernel = match ctx.attr_ints("kernel_shape")? {
        Some(k) => k
            .iter()
            .map(|&v| to_dim(i128::from(v), "kernel_shape"))
            .collect::<R<Vec<u64>>>()?,
        None => w.shape[2..].to_vec(),
    };
    let win = window(ctx, spatial, kernel)?;
    let mut shape = vec![x.shape[0], m];
    if let Some(out) = ctx.attr_ints("output_shape")? {
        let out = &out[out.len().saturating_sub(spatial)..];
        if out.len() != spatial {
            return msg("attribute 'output_shape' has fewer values than spatial dims");
        }
        for &o in out {
            shape.push(to_dim(i128::from(o), "output_shape")?);
        }
        return Ok(Info::new(x.dtype, shape));
    }
    let output_padding = ctx.attr_ints("output_padding")?.unwrap_or(vec![0; spatial]);
    if output_padding.len() != spatial {
        return msg("attribute 'output_padding' needs one value per spatial dim");
    }
    for (i, &op) in output_padding.iter().enumerate() {
        let n = i128::from(x.shape[2 + i]);
        let s = i128::from(win.strides[i]);
        let ek = (i128::from(win.kernel[i]) - 1).max(0) * i128::from(win.dilations[i]) + 1;
        let out = match win.auto_pad.as_str() {
            "SAME_UPPER" | "SAME_LOWER" => n * s,
            _ => {
                let (pb, pe) = if win.auto_pad == "VALID" {
                    (0, 0)
                } else {
                    win.pads[i]
                };
                s * (n - 1) + i128::from(op) + ek - i128::from(pb) - i128::from(pe)
            }
        };
        shape.push(to_dim(out, &format!("output spatial dim {i}"))?);
    }
    Ok(Info::new(x.dtype, shape))
}

fn pool(ctx: &Ctx) -> R<Vec<Info>> {
    let x = ctx.input(0)?;
    if x.shape.len() < 3 {
        return msg(format!(
            "input 0 '{}' has shape {}; {} needs (N, C, spatial...)",
            ctx.name(0),
            fmt_shape(&x.shape),
            ctx.op
        ));
    }
    let spatial = x.shape.len() - 2;
    let kernel = match ctx.attr_ints("kernel_shape")? {
        Some(k) => k
            .iter()
            .map(|&v| to_dim(i128::from(v), "kernel_shape"))
            .collect::<R<Vec<u64>>>()?,
        None => return msg("attribute 'kernel_shape' is required"),
    };
    let win = window(ctx, spatial, kernel)?;
    let ceil_mode = ctx.attr_int("ceil_mode", 0)? != 0;
    let mut shape = x.shape[..2].to_vec();
    for i in 0..spatial {
        shape.push(window_out(&win, i, x.shape[2 + i], ceil_mode)?);
    }
    let mut outs = vec![Info::new(x.dtype, shape.clone())];
    if ctx.n_outputs > 1 {
        outs.push(Info::new(DType::Int64, shape));
    }
    Ok(outs)
}

fn layer_norm(ctx: &Ctx) -> R<Vec<Info>> {
    let x = ctx.input(0)?;
    let axis = ctx.axis("axis", ctx.attr_int("axis", -1)?, x.shape.len())?;
    let stash = ctx.attr_int("stash_type", 1)?;
    let stash = i32::try_from(stash)
        .ok()
        .and_then(DType::from_onnx_code)
        .ok_or_else(|| {
            NodeError::Msg(format!(
                "attribute 'stash_type' {stash} is not a known type"
            ))
        })?;
    let mut reduced = x.shape.clone();
    reduced[axis..].iter_mut().for_each(|d| *d = 1);
    let mut outs = vec![Info::new(x.dtype, x.shape.clone())];
    for _ in 1..ctx.n_outputs {
        outs.push(Info::new(stash, reduced.clone()));
    }
    Ok(outs)
}

fn concat(ctx: &Ctx) -> R<Info> {
    let slots: Vec<usize> = (0..ctx.inputs.len()).collect();
    concat_at(ctx, &slots)
}

/// `Concat` of the inputs in `slots` (QLinearConcat interleaves scales with the data).
fn concat_at(ctx: &Ctx, slots: &[usize]) -> R<Info> {
    let first = ctx.input(
        *slots
            .first()
            .ok_or_else(|| NodeError::Msg("Concat has no inputs".into()))?,
    )?;
    let rank = first.shape.len();
    let axis = ctx.axis("axis", ctx.attr_int("axis", 0)?, rank)?;
    let mut shape = first.shape.clone();
    shape[axis] = 0;
    let mut parts = Vec::new();
    for &slot in slots {
        let info = ctx.input(slot)?;
        if info.shape.len() != rank
            || info
                .shape
                .iter()
                .zip(&first.shape)
                .enumerate()
                .any(|(i, (a, b))| i != axis && a != b)
        {
            return msg(format!(
                "input {slot} '{}' {} does not match input 0 {} outside axis {axis}",
                ctx.name(slot),
                fmt_shape(&info.shape),
                fmt_shape(&first.shape)
            ));
        }
        shape[axis] = shape[axis]
            .checked_add(info.shape[axis])
            .ok_or_else(|| NodeError::Msg("concatenated dim overflows".into()))?;
        parts.push(info);
    }
    let data = fold::concat(&parts, axis, &shape);
    Ok(Info::with_data(first.dtype, shape, data))
}

fn split(ctx: &Ctx) -> R<Vec<Info>> {
    let x = ctx.input(0)?;
    let axis = ctx.axis("axis", ctx.attr_int("axis", 0)?, x.shape.len())?;
    let dim = x.shape[axis];
    let n = ctx.n_outputs as u64;
    if n == 0 {
        return msg("Split has no outputs; give it at least one output name");
    }
    if let Some(k) = ctx.attrs.get("num_outputs") {
        if *k != Attribute::Int(n as i64) {
            return msg(format!(
                "attribute 'num_outputs' is {k:?} but the node has {n} outputs; they must agree"
            ));
        }
    }
    let sizes: Vec<u64> = if ctx.opt_input(1).is_some() {
        ctx.ints_input(1, "split")?
            .iter()
            .map(|&s| to_dim(i128::from(s), "split size"))
            .collect::<R<_>>()?
    } else if let Some(s) = ctx.attr_ints("split")? {
        s.iter()
            .map(|&s| to_dim(i128::from(s), "split size"))
            .collect::<R<_>>()?
    } else {
        if n == 0 {
            return msg("Split has no outputs");
        }
        // Equal parts; with `num_outputs` (opset 18) the last part may be smaller.
        let part = dim.div_ceil(n);
        if ctx.attrs.get("num_outputs").is_none() && dim % n != 0 {
            return msg(format!(
                "dim {axis} ({dim}) does not split into {n} equal parts; give 'split' sizes"
            ));
        }
        (0..n)
            .map(|i| part.min(dim.saturating_sub(i * part)))
            .collect()
    };
    if sizes.len() as u64 != n {
        return msg(format!("{} split sizes for {n} outputs", sizes.len()));
    }
    let total = sizes.iter().try_fold(0u64, |a, &s| a.checked_add(s));
    if total != Some(dim) {
        return msg(format!(
            "split sizes {sizes:?} do not add up to dim {axis} of input 0 ({dim})"
        ));
    }
    Ok(sizes
        .iter()
        .map(|&s| {
            let mut shape = x.shape.clone();
            shape[axis] = s;
            Info::new(x.dtype, shape)
        })
        .collect())
}

/// One axis of a slice: first index, step and length.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SliceAxis {
    pub start: i128,
    pub step: i128,
    pub len: u64,
}

/// ONNX `Slice` on one dim of size `dim`: negative indices count from the end, then
/// clamped (to `[0, dim]` for positive steps, `[-1, dim-1]` for negative ones).
pub fn slice_axis(dim: u64, start: i64, end: i64, step: i64) -> Result<SliceAxis, String> {
    if step == 0 {
        return Err("a step is 0".into());
    }
    let d = i128::from(dim);
    let (mut s, mut e, st) = (i128::from(start), i128::from(end), i128::from(step));
    if s < 0 {
        s += d;
    }
    if e < 0 {
        e += d;
    }
    let len = if st > 0 {
        s = s.clamp(0, d);
        e = e.clamp(0, d);
        if e > s {
            (e - s + st - 1) / st
        } else {
            0
        }
    } else {
        s = s.clamp(0, (d - 1).max(0));
        e = e.clamp(-1, d - 1);
        if s > e && d > 0 {
            (s - e + (-st) - 1) / (-st)
        } else {
            0
        }
    };
    Ok(SliceAxis {
        start: s,
        step: st,
        len: u64::try_from(len).unwrap_or(0),
    })
}

fn slice(ctx: &Ctx) -> R<Info> {
    let x = ctx.input(0)?;
    let rank = x.shape.len();
    let (starts, ends, axes, steps) = if ctx.opset >= 10 || ctx.inputs.len() > 1 {
        let starts = ctx.ints_input(1, "starts")?;
        let ends = ctx.ints_input(2, "ends")?;
        let axes = match ctx.opt_input(3) {
            Some(_) => Some(ctx.ints_input(3, "axes")?),
            None => None,
        };
        let steps = match ctx.opt_input(4) {
            Some(_) => Some(ctx.ints_input(4, "steps")?),
            None => None,
        };
        (starts, ends, axes, steps)
    } else {
        (
            ctx.attr_ints("starts")?.unwrap_or_default(),
            ctx.attr_ints("ends")?.unwrap_or_default(),
            ctx.attr_ints("axes")?,
            None,
        )
    };
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return msg(format!(
            "starts, ends, axes and steps must have equal lengths, got {}, {}, {} and {}",
            starts.len(),
            ends.len(),
            axes.len(),
            steps.len()
        ));
    }
    let axes = ctx.axes("axis", &axes, rank)?;
    let mut per_axis: Vec<SliceAxis> = x
        .shape
        .iter()
        .map(|&d| SliceAxis {
            start: 0,
            step: 1,
            len: d,
        })
        .collect();
    for (i, &a) in axes.iter().enumerate() {
        per_axis[a] = slice_axis(x.shape[a], starts[i], ends[i], steps[i])
            .map_err(|e| NodeError::Msg(format!("axis {a}: {e}")))?;
    }
    let shape: Vec<u64> = per_axis.iter().map(|s| s.len).collect();
    let data = fold::slice(x, &per_axis, &shape);
    Ok(Info::with_data(x.dtype, shape, data))
}

fn gather(ctx: &Ctx) -> R<Info> {
    let x = ctx.input(0)?;
    let idx = ctx.input(1)?;
    let axis = ctx.axis("axis", ctx.attr_int("axis", 0)?, x.shape.len())?;
    let mut shape = x.shape[..axis].to_vec();
    shape.extend_from_slice(&idx.shape);
    shape.extend_from_slice(&x.shape[axis + 1..]);
    if let Some(ix) = idx.ints() {
        let d = i128::from(x.shape[axis]);
        if let Some(&bad) = ix.iter().find(|&&i| !(-d..d).contains(&i128::from(i))) {
            return msg(format!(
                "index {bad} in input 1 '{}' is out of range for dim {axis} of size {d}",
                ctx.name(1)
            ));
        }
    }
    let data = fold::gather(x, idx, axis, &shape);
    Ok(Info::with_data(x.dtype, shape, data))
}

fn transpose(ctx: &Ctx) -> R<Info> {
    let x = ctx.input(0)?;
    let rank = x.shape.len();
    let perm = match ctx.attr_ints("perm")? {
        Some(p) => {
            if p.len() != rank {
                return msg(format!(
                    "attribute 'perm' has {} values for an input of rank {rank}",
                    p.len()
                ));
            }
            ctx.axes("perm entry", &p, rank)?
        }
        None => (0..rank).rev().collect(),
    };
    let shape: Vec<u64> = perm.iter().map(|&p| x.shape[p]).collect();
    let data = fold::transpose(x, &perm, &shape);
    Ok(Info::with_data(x.dtype, shape, data))
}

/// ONNX `Reshape` target: `0` copies the input dim (unless `allowzero`), one `-1` is inferred.
pub fn reshape_shape(input: &[u64], target: &[i64], allowzero: bool) -> Result<Vec<u64>, String> {
    let total = elements(input).ok_or("the input's element count overflows")?;
    let mut out = Vec::with_capacity(target.len());
    let mut infer_at = None;
    for (i, &t) in target.iter().enumerate() {
        match t {
            -1 => {
                if infer_at.replace(i).is_some() {
                    return Err("the shape has more than one -1".into());
                }
                out.push(1);
            }
            0 if !allowzero => match input.get(i) {
                Some(&d) => out.push(d),
                None => {
                    return Err(format!(
                        "shape entry {i} is 0 (copy the input dim) but the input has rank {}",
                        input.len()
                    ))
                }
            },
            t if t >= 0 => out.push(t as u64),
            t => return Err(format!("shape entry {i} is {t}; only -1 may be negative")),
        }
    }
    let known = elements(&out).ok_or("the target element count overflows")?;
    if let Some(i) = infer_at {
        if known == 0 || total % known != 0 {
            return Err(format!(
                "cannot infer the -1 at entry {i}: {total} elements do not divide by {known}"
            ));
        }
        out[i] = total / known;
    } else if known != total {
        return Err(format!(
            "the target has {known} elements but the input has {total}"
        ));
    }
    Ok(out)
}

fn reshape(ctx: &Ctx) -> R<Info> {
    let x = ctx.input(0)?;
    let target = ctx.ints_input(1, "shape")?;
    let allowzero = ctx.attr_int("allowzero", 0)? != 0;
    let shape = reshape_shape(&x.shape, &target, allowzero).map_err(|e| {
        NodeError::Msg(format!(
            "input 1 '{}' = {target:?} does not fit input 0 '{}' {}: {e}",
            ctx.name(1),
            ctx.name(0),
            fmt_shape(&x.shape)
        ))
    })?;
    Ok(Info::with_data(x.dtype, shape, x.data.clone()))
}

fn flatten(ctx: &Ctx) -> R<Info> {
    let x = ctx.input(0)?;
    let rank = x.shape.len();
    let axis = ctx.attr_int("axis", 1)?;
    let axis = if axis == rank as i64 {
        rank
    } else {
        ctx.axis("axis", axis, rank)?
    };
    let outer = elements(&x.shape[..axis]);
    let inner = elements(&x.shape[axis..]);
    match (outer, inner) {
        (Some(o), Some(i)) => Ok(Info::with_data(x.dtype, vec![o, i], x.data.clone())),
        _ => msg("element count overflows"),
    }
}

fn axes_from(ctx: &Ctx, slot: usize) -> R<Option<Vec<i64>>> {
    if ctx.opt_input(slot).is_some() {
        Ok(Some(ctx.ints_input(slot, "axes")?))
    } else {
        ctx.attr_ints("axes")
    }
}

fn squeeze(ctx: &Ctx) -> R<Info> {
    let x = ctx.input(0)?;
    let shape = match axes_from(ctx, 1)? {
        Some(axes) => {
            let axes = ctx.axes("axis", &axes, x.shape.len())?;
            if let Some(&a) = axes.iter().find(|&&a| x.shape[a] != 1) {
                return msg(format!(
                    "axis {a} of input 0 '{}' {} is not 1 and cannot be squeezed",
                    ctx.name(0),
                    fmt_shape(&x.shape)
                ));
            }
            let mask = axis_mask(&axes, x.shape.len());
            x.shape
                .iter()
                .zip(&mask)
                .filter(|(_, &m)| !m)
                .map(|(&d, _)| d)
                .collect()
        }
        None => x.shape.iter().copied().filter(|&d| d != 1).collect(),
    };
    Ok(Info::with_data(x.dtype, shape, x.data.clone()))
}

fn unsqueeze(ctx: &Ctx) -> R<Info> {
    let x = ctx.input(0)?;
    let axes = axes_from(ctx, 1)?.ok_or_else(|| {
        NodeError::Msg("the axes (input 1 or attribute 'axes') are missing".into())
    })?;
    let rank = x.shape.len() + axes.len();
    let axes = ctx.axes("axis", &axes, rank)?;
    let mask = axis_mask(&axes, rank);
    let mut rest = x.shape.iter();
    let shape: Vec<u64> = (0..rank)
        .map(|i| {
            if mask[i] {
                1
            } else {
                rest.next().copied().unwrap_or(1)
            }
        })
        .collect();
    Ok(Info::with_data(x.dtype, shape, x.data.clone()))
}

fn expand(ctx: &Ctx) -> R<Info> {
    let x = ctx.input(0)?;
    let target: Vec<u64> = ctx
        .ints_input(1, "shape")?
        .iter()
        .map(|&d| to_dim(i128::from(d), "shape entry"))
        .collect::<R<_>>()?;
    let shape = broadcast(&[(0, &x.shape), (1, &target)]).map_err(NodeError::Msg)?;
    let data = fold::expand(x, &shape);
    Ok(Info::with_data(x.dtype, shape, data))
}

fn pad(ctx: &Ctx) -> R<Info> {
    let x = ctx.input(0)?;
    let rank = x.shape.len();
    let pads = if ctx.opt_input(1).is_some() {
        ctx.ints_input(1, "pads")?
    } else if let Some(p) = ctx.attr_ints("pads")? {
        p
    } else {
        ctx.attr_ints("paddings")?.unwrap_or_default()
    };
    let axes = match ctx.opt_input(3) {
        Some(_) => ctx.axes("axis", &ctx.ints_input(3, "axes")?, rank)?,
        None => (0..rank).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return msg(format!(
            "{} pads for {} axes; pads needs begins then ends for every axis",
            pads.len(),
            axes.len()
        ));
    }
    let mut shape = x.shape.clone();
    let n = axes.len();
    for (i, &a) in axes.iter().enumerate() {
        let d = i128::from(x.shape[a]) + i128::from(pads[i]) + i128::from(pads[i + n]);
        shape[a] = to_dim(d, &format!("padded dim {a}"))?;
    }
    Ok(Info::new(x.dtype, shape))
}

fn resize(ctx: &Ctx) -> R<Info> {
    let x = ctx.input(0)?;
    let rank = x.shape.len();
    let axes = match ctx.attr_ints("axes")? {
        Some(a) => ctx.axes("axis", &a, rank)?,
        None => (0..rank).collect(),
    };
    let non_empty = |slot: usize| {
        ctx.opt_input(slot)
            .filter(|i| elements(&i.shape) != Some(0))
    };
    let mut shape = x.shape.clone();
    let (scales_slot, sizes_slot) = if ctx.op == "Upsample" || ctx.opset < 11 {
        (1, usize::MAX)
    } else {
        (2, 3)
    };
    if non_empty(sizes_slot).is_some() {
        let sizes = ctx.ints_input(sizes_slot, "sizes")?;
        if sizes.len() != axes.len() {
            return msg(format!("{} sizes for {} axes", sizes.len(), axes.len()));
        }
        let policy = ctx.attr_string("keep_aspect_ratio_policy", "stretch")?;
        if policy == "stretch" {
            for (&a, &s) in axes.iter().zip(&sizes) {
                shape[a] = to_dim(i128::from(s), "size")?;
                if shape[a] == 0 && x.shape[a] != 0 {
                    return msg(format!(
                        "sizes (input {sizes_slot} '{}') resize axis {a} of size {} to 0; every size must be at least 1",
                        ctx.name(sizes_slot),
                        x.shape[a]
                    ));
                }
            }
        } else {
            let ratios = axes
                .iter()
                .zip(&sizes)
                .map(|(&a, &s)| s as f64 / x.shape[a] as f64);
            let scale = match policy.as_str() {
                "not_larger" => ratios.fold(f64::INFINITY, f64::min),
                "not_smaller" => ratios.fold(0.0, f64::max),
                other => return msg(format!("keep_aspect_ratio_policy '{other}' is not known")),
            };
            for &a in &axes {
                shape[a] = float_dim((x.shape[a] as f64 * scale).round(), "resized dim")?;
            }
        }
    } else {
        let scales = if non_empty(scales_slot).is_some() {
            ctx.floats_input(scales_slot, "scales")?
        } else if let Some(s) = ctx.attr_floats("scales")? {
            s
        } else {
            return msg("neither scales nor sizes is given");
        };
        if scales.len() != axes.len() {
            return msg(format!("{} scales for {} axes", scales.len(), axes.len()));
        }
        for (&a, &s) in axes.iter().zip(&scales) {
            if !(s.is_finite() && s > 0.0) {
                return msg(format!(
                    "scale {s} for axis {a} (input {scales_slot} '{}') is not a positive finite number; every scale must be > 0",
                    ctx.name(scales_slot)
                ));
            }
            shape[a] = float_dim((x.shape[a] as f64 * s).floor(), "resized dim")?;
            if shape[a] == 0 && x.shape[a] != 0 {
                return msg(format!(
                    "scale {s} resizes axis {a} of size {} to 0; the scale must be at least 1/{}",
                    x.shape[a], x.shape[a]
                ));
            }
        }
    }
    Ok(Info::new(x.dtype, shape))
}

fn float_dim(v: f64, what: &str) -> R<u64> {
    if (0.0..1.8e19).contains(&v) {
        Ok(v as u64)
    } else {
        msg(format!("{what} is {v}, not a size"))
    }
}

fn reduce_shape(shape: &[u64], axes: &[usize], keep: bool) -> Vec<u64> {
    let mask = axis_mask(axes, shape.len());
    shape
        .iter()
        .zip(&mask)
        .filter_map(|(&d, &m)| match (m, keep) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect()
}

fn reduce(ctx: &Ctx) -> R<Info> {
    let x = ctx.input(0)?;
    let rank = x.shape.len();
    let keep = ctx.attr_int("keepdims", 1)? != 0;
    let axes = axes_from(ctx, 1)?.unwrap_or_default();
    if axes.is_empty() && ctx.attr_int("noop_with_empty_axes", 0)? != 0 {
        return Ok(Info::new(x.dtype, x.shape.clone()));
    }
    let axes = if axes.is_empty() {
        (0..rank).collect()
    } else {
        ctx.axes("axis", &axes, rank)?
    };
    let shape = reduce_shape(&x.shape, &axes, keep);
    let data = fold::reduce(ctx.op, x, &axes, &shape);
    Ok(Info::with_data(x.dtype, shape, data))
}

fn shape_op(ctx: &Ctx) -> R<Info> {
    let x = ctx.input(0)?;
    let rank = x.shape.len() as i64;
    let clamp = |v: i64| -> i64 {
        let v = if v < 0 { v.saturating_add(rank) } else { v };
        v.clamp(0, rank)
    };
    let start = clamp(ctx.attr_int("start", 0)?) as usize;
    let end = clamp(ctx.attr_int("end", rank)?) as usize;
    let dims: Vec<i64> = x.shape[start..end.max(start)]
        .iter()
        .map(|&d| i64::try_from(d))
        .collect::<Result<_, _>>()
        .map_err(|_| NodeError::Msg("a dim exceeds the int64 range".into()))?;
    let n = dims.len() as u64;
    Ok(Info::with_data(
        DType::Int64,
        vec![n],
        Some(Data::Ints(dims)),
    ))
}

fn constant_of_shape(ctx: &Ctx) -> R<Info> {
    let (dtype, _) = constant_fill(ctx)?;
    let target = ctx.input(0)?;
    if target.data.is_none() && target.shape.len() == 1 {
        if let Some(m) = ctx.max_dim {
            // A runtime shape: every dim planned at the user's bound.
            let rank = target.shape[0] as usize;
            return Ok(Info::bounded(
                dtype,
                vec![m; rank],
                format!(
                    "input 0 '{}' (shape) is a runtime value; every dim <= --max-dim {m}",
                    ctx.name(0)
                ),
            ));
        }
    }
    let shape: Vec<u64> = ctx
        .ints_input(0, "shape")?
        .iter()
        .map(|&d| to_dim(i128::from(d), "shape entry"))
        .collect::<R<_>>()?;
    let (dtype, fill) = constant_fill(ctx)?;
    let data = fill.and_then(|f| fold::fill(&f, &shape));
    Ok(Info::with_data(dtype, shape, data))
}

/// `ConstantOfShape`'s element type and fill value (float 0 by default).
fn constant_fill(ctx: &Ctx) -> R<(DType, Option<Data>)> {
    Ok(match ctx.attrs.get("value") {
        None => (DType::Float, Some(Data::Floats(vec![0.0]))),
        Some(Attribute::Tensor(t)) => (t.dtype, Data::from_tensor_data(&t.data)),
        Some(other) => {
            return msg(format!(
                "attribute 'value' must be a tensor, found {other:?}"
            ))
        }
    })
}

fn range(ctx: &Ctx) -> R<Info> {
    let dtype = ctx.input(0)?.dtype;
    let start = ctx.input(0)?;
    let limit = ctx.input(1)?;
    let delta = ctx.input(2)?;
    let scalar = |slot: usize, info: &Info| -> R<Data> {
        match &info.data {
            Some(d) if d.len() == 1 => Ok(d.clone()),
            Some(_) => msg(format!("input {slot} '{}' must be a scalar", ctx.name(slot))),
            None => msg(format!(
                "input {slot} '{}' is not known at import time, so Range's length cannot be computed; give an upper bound with --max-dim <n> (ImportOptions::max_dim)",
                ctx.name(slot)
            )),
        }
    };
    if [start, limit, delta].iter().any(|i| i.data.is_none()) {
        if let Some(m) = ctx.max_dim {
            return Ok(Info::bounded(
                dtype,
                vec![m],
                "Range's start, limit or delta is a runtime value; its length <= --max-dim",
            ));
        }
    }
    let (s, l, d) = (scalar(0, start)?, scalar(1, limit)?, scalar(2, delta)?);
    let (n, data) = fold::range(&s, &l, &d).map_err(NodeError::Msg)?;
    Ok(Info::with_data(dtype, vec![n], data))
}

fn tile(ctx: &Ctx) -> R<Info> {
    let x = ctx.input(0)?;
    let reps = ctx.ints_input(1, "repeats")?;
    if reps.len() != x.shape.len() {
        return msg(format!(
            "{} repeats for an input of rank {}",
            reps.len(),
            x.shape.len()
        ));
    }
    let shape = x
        .shape
        .iter()
        .zip(&reps)
        .map(|(&d, &r)| checked_dim_mul(d, to_dim(i128::from(r), "repeat")?, "tiled dim"))
        .collect::<R<Vec<u64>>>()?;
    Ok(Info::new(x.dtype, shape))
}

fn depth_space(ctx: &Ctx) -> R<Info> {
    let x = ctx.input(0)?;
    if x.shape.len() != 4 {
        return msg(format!(
            "input 0 must be 4-D (N, C, H, W), got {}",
            fmt_shape(&x.shape)
        ));
    }
    let b = ctx.attr_int("blocksize", 0)?;
    let b = u64::try_from(b).ok().filter(|&b| b > 0).ok_or_else(|| {
        NodeError::Msg(format!("attribute 'blocksize' is {b}; it must be positive"))
    })?;
    let bb = checked_dim_mul(b, b, "blocksize squared")?;
    let [n, c, h, w] = [x.shape[0], x.shape[1], x.shape[2], x.shape[3]];
    let shape = if ctx.op == "DepthToSpace" {
        if c % bb != 0 {
            return msg(format!(
                "channels {c} are not a multiple of blocksize² {bb}"
            ));
        }
        vec![
            n,
            c / bb,
            checked_dim_mul(h, b, "H")?,
            checked_dim_mul(w, b, "W")?,
        ]
    } else {
        if h % b != 0 || w % b != 0 {
            return msg(format!(
                "H {h} and W {w} must be multiples of blocksize {b}"
            ));
        }
        vec![n, checked_dim_mul(c, bb, "C")?, h / b, w / b]
    };
    Ok(Info::new(x.dtype, shape))
}

/// Einsum with explicit or implicit output and no ellipsis.
fn einsum(ctx: &Ctx) -> R<Info> {
    let eq: String = ctx
        .attr_string("equation", "")?
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    if eq.contains("...") {
        return Err(NodeError::Unsupported(
            "Einsum equations with '...' are not supported".into(),
        ));
    }
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != ctx.inputs.len() {
        return msg(format!(
            "equation '{eq}' has {} operands but the node has {} inputs",
            terms.len(),
            ctx.inputs.len()
        ));
    }
    let mut sizes: BTreeMap<char, u64> = BTreeMap::new();
    let mut counts: BTreeMap<char, usize> = BTreeMap::new();
    for (slot, term) in terms.iter().enumerate() {
        let info = ctx.input(slot)?;
        if term.chars().count() != info.shape.len() {
            return msg(format!(
                "operand {slot} '{term}' has {} letters but input {slot} has rank {}",
                term.chars().count(),
                info.shape.len()
            ));
        }
        for (c, &d) in term.chars().zip(&info.shape) {
            if !c.is_ascii_alphabetic() {
                return msg(format!("equation '{eq}' has '{c}', not a letter"));
            }
            *counts.entry(c).or_default() += 1;
            let e = sizes.entry(c).or_insert(d);
            if *e == 1 {
                *e = d;
            } else if d != 1 && *e != d {
                return msg(format!("letter '{c}' is both {} and {d}", *e));
            }
        }
    }
    let out: Vec<char> = match rhs {
        Some(r) => r.chars().collect(),
        None => counts
            .iter()
            .filter(|(_, &n)| n == 1)
            .map(|(&c, _)| c)
            .collect(),
    };
    let shape =
        out.iter()
            .map(|c| {
                sizes.get(c).copied().ok_or_else(|| {
                    NodeError::Msg(format!("output letter '{c}' is not in any operand"))
                })
            })
            .collect::<R<Vec<u64>>>()?;
    Ok(Info::new(ctx.input(0)?.dtype, shape))
}

#[cfg(test)]
mod tests;
