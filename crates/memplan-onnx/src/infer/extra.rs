//! Default-domain operators beyond the basic families: recurrent layers, gathers and
//! samplers, RoI pooling, normalisations of recent opsets, opset-23 attention, random
//! generators, operators with data-dependent output sizes (planned at an upper bound), and
//! the attribute checks that turn silent nonsense (an out-of-range `Softmax` axis, a
//! `BatchNormalization` without its statistics) into errors.

use memplan_graph::DType;

use super::{
    checked_dim_mul, conv_at, elements, fmt_shape, layer_norm, msg, quant, to_dim, Ctx, Info,
    NodeError, R,
};
use crate::fold::Data;

/// Infers the operators this module owns; `None` leaves the node to the main rules.
pub(super) fn infer(ctx: &Ctx) -> R<Option<Vec<Info>>> {
    if let Some(outs) = quant::infer(ctx)? {
        return Ok(Some(outs));
    }
    let same = |slot: usize| -> R<Vec<Info>> {
        let x = ctx.input(slot)?;
        Ok(vec![Info::new(x.dtype, x.shape.clone())])
    };
    Ok(Some(match ctx.op {
        "Softmax" | "LogSoftmax" | "Hardmax" => {
            let x = ctx.input(0)?;
            let default = if ctx.opset < 13 { 1 } else { -1 };
            ctx.axis("axis", ctx.attr_int("axis", default)?, x.shape.len().max(1))?;
            same(0)?
        }
        "CumSum" => {
            let x = ctx.input(0)?;
            if let Some([a]) = ctx.opt_input(1).and_then(|a| a.ints()) {
                ctx.axis("axis (input 1)", *a, x.shape.len())?;
            }
            same(0)?
        }
        "LpNormalization" => {
            let x = ctx.input(0)?;
            ctx.axis("axis", ctx.attr_int("axis", -1)?, x.shape.len())?;
            same(0)?
        }
        "Swish" | "ReverseSequence" | "CumProd" => same(0)?,
        "HannWindow" | "HammingWindow" | "BlackmanWindow" => {
            let n = ctx.ints_input(0, "size")?;
            let [n] = n[..] else {
                return msg(format!(
                    "input 0 '{}' (size) must hold one value",
                    ctx.name(0)
                ));
            };
            let dtype = dtype_attr(ctx, "output_datatype", DType::Float)?;
            vec![Info::new(
                dtype,
                vec![to_dim(i128::from(n), "window size")?],
            )]
        }
        "MelWeightMatrix" => {
            let scalar = |slot: usize, what: &str| -> R<u64> {
                match ctx.ints_input(slot, what)?[..] {
                    [v] => to_dim(i128::from(v), what),
                    _ => msg(format!(
                        "input {slot} '{}' ({what}) must hold one value",
                        ctx.name(slot)
                    )),
                }
            };
            let bins = scalar(0, "num_mel_bins")?;
            let dft = scalar(1, "dft_length")?;
            let dtype = dtype_attr(ctx, "output_datatype", DType::Float)?;
            vec![Info::new(dtype, vec![dft / 2 + 1, bins])]
        }
        "DFT" => vec![dft(ctx)?],
        "SoftmaxCrossEntropyLoss" | "NegativeLogLikelihoodLoss" => {
            let x = ctx.input(0)?;
            if x.shape.len() < 2 {
                return msg(format!(
                    "input 0 '{}' {} must be (N, C, d...)",
                    ctx.name(0),
                    fmt_shape(&x.shape)
                ));
            }
            let reduction = ctx.attr_string("reduction", "mean")?;
            let loss = match reduction.as_str() {
                "none" => {
                    let mut s = vec![x.shape[0]];
                    s.extend_from_slice(&x.shape[2..]);
                    s
                }
                "mean" | "sum" => vec![],
                other => {
                    return msg(format!(
                        "attribute 'reduction' is '{other}'; expected none, mean or sum"
                    ))
                }
            };
            vec![
                Info::new(x.dtype, loss),
                Info::new(x.dtype, x.shape.clone()),
            ]
        }
        "Bernoulli" | "EyeLike" => {
            let x = ctx.input(0)?;
            vec![Info::new(
                dtype_attr(ctx, "dtype", x.dtype)?,
                x.shape.clone(),
            )]
        }
        "RandomNormal" | "RandomUniform" => {
            let shape = ctx
                .attr_ints("shape")?
                .ok_or_else(|| NodeError::Msg("attribute 'shape' is required".into()))?
                .iter()
                .map(|&d| to_dim(i128::from(d), "shape entry"))
                .collect::<R<Vec<u64>>>()?;
            vec![Info::new(dtype_attr(ctx, "dtype", DType::Float)?, shape)]
        }
        "Multinomial" => {
            let x = ctx.input(0)?;
            let n = ctx.attr_int("sample_size", 1)?;
            let n = to_dim(i128::from(n), "sample_size")?;
            let batch = x.shape.first().copied().unwrap_or(1);
            vec![Info::new(
                dtype_attr(ctx, "dtype", DType::Int32)?,
                vec![batch, n],
            )]
        }
        "Det" => {
            let x = ctx.input(0)?;
            let r = x.shape.len();
            if r < 2 || x.shape[r - 1] != x.shape[r - 2] {
                return msg(format!(
                    "input 0 '{}' {} must end in a square matrix",
                    ctx.name(0),
                    fmt_shape(&x.shape)
                ));
            }
            vec![Info::new(x.dtype, x.shape[..r - 2].to_vec())]
        }
        "BatchNormalization" => batch_norm(ctx)?,
        "RMSNormalization" => {
            let x = ctx.input(0)?;
            ctx.axis("axis", ctx.attr_int("axis", -1)?, x.shape.len())?;
            same(0)?
        }
        "SimplifiedLayerNormalization" => layer_norm(ctx)?,
        "DeformConv" => vec![Info::new(ctx.input(0)?.dtype, conv_at(ctx, 0, 1)?)],
        "Col2Im" => vec![col2im(ctx)?],
        "GridSample" => {
            let x = ctx.input(0)?;
            let grid = ctx.input(1)?;
            let r = x.shape.len();
            if r < 3 || grid.shape.len() != r || grid.shape[0] != x.shape[0] {
                return msg(format!(
                    "input 0 '{}' {} and input 1 '{}' (grid) {} must be (N, C, spatial...) and (N, out spatial..., {})",
                    ctx.name(0),
                    fmt_shape(&x.shape),
                    ctx.name(1),
                    fmt_shape(&grid.shape),
                    r.saturating_sub(2)
                ));
            }
            let mut shape = x.shape[..2].to_vec();
            shape.extend_from_slice(&grid.shape[1..r - 1]);
            vec![Info::new(x.dtype, shape)]
        }
        "AffineGrid" => {
            let theta = ctx.input(0)?;
            let size = ctx.ints_input(1, "size")?;
            let dims = size
                .iter()
                .map(|&d| to_dim(i128::from(d), "size entry"))
                .collect::<R<Vec<u64>>>()?;
            if dims.len() < 3 {
                return msg(format!(
                    "input 1 '{}' (size) must be (N, C, H, W) or (N, C, D, H, W), got {size:?}",
                    ctx.name(1)
                ));
            }
            let mut shape = vec![dims[0]];
            shape.extend_from_slice(&dims[2..]);
            shape.push((dims.len() - 2) as u64);
            vec![Info::new(theta.dtype, shape)]
        }
        "RoiAlign" | "MaxRoiPool" => {
            let x = ctx.input(0)?;
            let rois = ctx.input(1)?;
            if x.shape.len() != 4 || rois.shape.len() != 2 {
                return msg(format!(
                    "input 0 '{}' {} must be (N, C, H, W) and input 1 '{}' (rois) {} (num_rois, {})",
                    ctx.name(0),
                    fmt_shape(&x.shape),
                    ctx.name(1),
                    fmt_shape(&rois.shape),
                    if ctx.op == "RoiAlign" { 4 } else { 5 }
                ));
            }
            let (h, w) = if ctx.op == "RoiAlign" {
                (
                    positive(ctx, "output_height", ctx.attr_int("output_height", 1)?)?,
                    positive(ctx, "output_width", ctx.attr_int("output_width", 1)?)?,
                )
            } else {
                match ctx.attr_ints("pooled_shape")?.as_deref() {
                    Some([h, w]) => (
                        positive(ctx, "pooled_shape", *h)?,
                        positive(ctx, "pooled_shape", *w)?,
                    ),
                    _ => return msg("attribute 'pooled_shape' must be [height, width]"),
                }
            };
            vec![Info::new(x.dtype, vec![rois.shape[0], x.shape[1], h, w])]
        }
        "MaxUnpool" => vec![max_unpool(ctx)?],
        "GatherND" => vec![gather_nd(ctx)?],
        "OneHot" => vec![one_hot(ctx)?],
        "CenterCropPad" => {
            let x = ctx.input(0)?;
            let shape = ctx.ints_input(1, "shape")?;
            let axes = match ctx.attr_ints("axes")? {
                Some(a) => ctx.axes("axis", &a, x.shape.len())?,
                None => (0..x.shape.len()).collect(),
            };
            if axes.len() != shape.len() {
                return msg(format!(
                    "input 1 '{}' (shape) has {} values for {} axes",
                    ctx.name(1),
                    shape.len(),
                    axes.len()
                ));
            }
            let mut out = x.shape.clone();
            for (&a, &d) in axes.iter().zip(&shape) {
                out[a] = to_dim(i128::from(d), "crop size")?;
            }
            vec![Info::new(x.dtype, out)]
        }
        "LSTM" | "GRU" | "RNN" => recurrent(ctx)?,
        "Attention" => attention(ctx)?,
        "RotaryEmbedding" => same(0)?,
        "NonZero" => vec![non_zero(ctx)?],
        "NonMaxSuppression" => vec![nms(ctx)?],
        "TopK" => top_k(ctx)?,
        "Unique" => unique(ctx)?,
        "Compress" => vec![compress(ctx)?],
        _ => return Ok(None),
    }))
}

fn positive(ctx: &Ctx, what: &str, v: i64) -> R<u64> {
    let _ = ctx;
    u64::try_from(v)
        .ok()
        .filter(|&v| v > 0)
        .ok_or_else(|| NodeError::Msg(format!("attribute '{what}' is {v}; it must be positive")))
}

fn dtype_attr(ctx: &Ctx, name: &str, default: DType) -> R<DType> {
    match ctx.attrs.get(name) {
        None => Ok(default),
        Some(_) => {
            let code = ctx.attr_int(name, 0)?;
            i32::try_from(code)
                .ok()
                .and_then(DType::from_onnx_code)
                .filter(|t| *t != DType::String)
                .ok_or_else(|| {
                    NodeError::Msg(format!(
                        "attribute '{name}' is {code}, not a known TensorProto.DataType"
                    ))
                })
        }
    }
}

/// X, scale, B, input_mean, input_var: all five are required, the four statistics are
/// `[C]` (`C` = dim 1 of X, or 1 for a rank-1 X).
fn batch_norm(ctx: &Ctx) -> R<Vec<Info>> {
    let x = ctx.input(0)?;
    let c = x.shape.get(1).copied().unwrap_or(1);
    for (slot, what) in [(1, "scale"), (2, "B"), (3, "input_mean"), (4, "input_var")] {
        let Some(p) = ctx.opt_input(slot) else {
            return msg(format!(
                "input {slot} ({what}) is missing; BatchNormalization needs X, scale, B, input_mean and input_var (the node has {} inputs)",
                ctx.inputs.len()
            ));
        };
        if p.shape != [c] && !(p.shape.is_empty() && c == 1) {
            return msg(format!(
                "input {slot} '{}' ({what}) has shape {} but input 0 '{}' {} has {c} channels; it must be [{c}]",
                ctx.name(slot),
                fmt_shape(&p.shape),
                ctx.name(0),
                fmt_shape(&x.shape)
            ));
        }
    }
    let mut outs = vec![Info::new(x.dtype, x.shape.clone())];
    for slot in 1..ctx.n_outputs {
        let dtype = ctx.input(2 + slot.min(2))?.dtype;
        outs.push(Info::new(dtype, vec![c]));
    }
    Ok(outs)
}

/// input (N, C x prod(block_shape), L), image_shape, block_shape → (N, C, image_shape...).
fn col2im(ctx: &Ctx) -> R<Info> {
    let x = ctx.input(0)?;
    let image = ctx.ints_input(1, "image_shape")?;
    let block = ctx.ints_input(2, "block_shape")?;
    if x.shape.len() != 3 || image.len() != block.len() {
        return msg(format!(
            "input 0 '{}' {} must be (N, C x prod(block_shape), L) and image_shape {image:?} and block_shape {block:?} of one length",
            ctx.name(0),
            fmt_shape(&x.shape)
        ));
    }
    let mut prod = 1u64;
    for &b in &block {
        prod = checked_dim_mul(
            prod,
            to_dim(i128::from(b), "block_shape entry")?,
            "block size",
        )?;
    }
    if prod == 0 || x.shape[1] % prod != 0 {
        return msg(format!(
            "dim 1 of input 0 ({}) is not a multiple of prod(block_shape) = {prod}",
            x.shape[1]
        ));
    }
    let mut shape = vec![x.shape[0], x.shape[1] / prod];
    for &d in &image {
        shape.push(to_dim(i128::from(d), "image_shape entry")?);
    }
    Ok(Info::new(x.dtype, shape))
}

fn max_unpool(ctx: &Ctx) -> R<Info> {
    let x = ctx.input(0)?;
    if let Some(out) = ctx.opt_input(2) {
        let _ = out;
        let dims = ctx.ints_input(2, "output_shape")?;
        let shape = dims
            .iter()
            .map(|&d| to_dim(i128::from(d), "output_shape entry"))
            .collect::<R<Vec<u64>>>()?;
        return Ok(Info::new(x.dtype, shape));
    }
    if x.shape.len() < 3 {
        return msg(format!(
            "input 0 '{}' {} must be (N, C, spatial...)",
            ctx.name(0),
            fmt_shape(&x.shape)
        ));
    }
    let spatial = x.shape.len() - 2;
    let kernel = ctx
        .attr_ints("kernel_shape")?
        .ok_or_else(|| NodeError::Msg("attribute 'kernel_shape' is required".into()))?;
    let strides = ctx.attr_ints("strides")?.unwrap_or(vec![1; spatial]);
    let pads = ctx.attr_ints("pads")?.unwrap_or(vec![0; 2 * spatial]);
    if kernel.len() != spatial || strides.len() != spatial || pads.len() != 2 * spatial {
        return msg(format!(
            "kernel_shape, strides and pads must have {spatial}, {spatial} and {} values",
            2 * spatial
        ));
    }
    let mut shape = x.shape[..2].to_vec();
    for i in 0..spatial {
        let d = (i128::from(x.shape[2 + i]) - 1) * i128::from(strides[i]) + i128::from(kernel[i])
            - i128::from(pads[i])
            - i128::from(pads[i + spatial]);
        shape.push(to_dim(d, &format!("output spatial dim {i}"))?);
    }
    Ok(Info::new(x.dtype, shape))
}

/// `indices.shape[..-1] ++ data.shape[batch_dims + indices.shape[-1]..]`.
fn gather_nd(ctx: &Ctx) -> R<Info> {
    let data = ctx.input(0)?;
    let idx = ctx.input(1)?;
    let b = usize::try_from(ctx.attr_int("batch_dims", 0)?)
        .map_err(|_| NodeError::Msg("attribute 'batch_dims' is negative".into()))?;
    let Some(&last) = idx.shape.last() else {
        return msg(format!(
            "input 1 '{}' (indices) must have rank 1 or more",
            ctx.name(1)
        ));
    };
    let depth = usize::try_from(last).unwrap_or(usize::MAX);
    if b >= idx.shape.len() || b.saturating_add(depth) > data.shape.len() {
        return msg(format!(
            "input 1 '{}' (indices) {} with batch_dims {b} indexes more dims than input 0 '{}' {} has",
            ctx.name(1),
            fmt_shape(&idx.shape),
            ctx.name(0),
            fmt_shape(&data.shape)
        ));
    }
    let mut shape = idx.shape[..idx.shape.len() - 1].to_vec();
    shape.extend_from_slice(&data.shape[b + depth..]);
    Ok(Info::new(data.dtype, shape))
}

/// indices, depth, values → indices' shape with `depth` inserted at `axis`.
fn one_hot(ctx: &Ctx) -> R<Info> {
    let idx = ctx.input(0)?;
    let values = ctx.input(2)?;
    let depth = ctx.floats_input(1, "depth")?;
    let [depth] = depth[..] else {
        return msg(format!(
            "input 1 '{}' (depth) must hold one value",
            ctx.name(1)
        ));
    };
    if !(depth.is_finite() && depth >= 1.0) {
        return msg(format!(
            "input 1 '{}' (depth) is {depth}; it must be at least 1",
            ctx.name(1)
        ));
    }
    let rank = idx.shape.len() + 1;
    let axis = ctx.axis("axis", ctx.attr_int("axis", -1)?, rank)?;
    let mut shape = idx.shape.clone();
    shape.insert(axis, depth as u64);
    Ok(Info::new(values.dtype, shape))
}

/// LSTM, GRU and RNN: X, W, R, B, sequence_lens, initial_h (, initial_c, P) →
/// Y, Y_h (, Y_c). `com.microsoft` DynamicQuantizeLSTM is an LSTM whose quantized W and R
/// are stored transposed: (directions, input, 4 x hidden) and (directions, hidden, 4 x hidden).
pub(super) fn recurrent(ctx: &Ctx) -> R<Vec<Info>> {
    let x = ctx.input(0)?;
    let w = ctx.input(1)?;
    let gates: u64 = match ctx.op {
        "LSTM" | "DynamicQuantizeLSTM" => 4,
        "GRU" => 3,
        _ => 1,
    };
    let direction = ctx.attr_string("direction", "forward")?;
    let dirs: u64 = match direction.as_str() {
        "forward" | "reverse" => 1,
        "bidirectional" => 2,
        other => {
            return msg(format!(
                "attribute 'direction' is '{other}'; expected forward, reverse or bidirectional"
            ))
        }
    };
    let layout = ctx.attr_int("layout", 0)?;
    let ([seq, batch, input], true) = (
        match x.shape[..] {
            [a, b, c] if layout == 0 => [a, b, c],
            [b, a, c] if layout == 1 => [a, b, c],
            _ => [0, 0, 0],
        },
        x.shape.len() == 3 && (layout == 0 || layout == 1),
    ) else {
        return msg(format!(
            "input 0 '{}' (X) {} with layout {layout} must be (seq, batch, input) for layout 0 or (batch, seq, input) for layout 1",
            ctx.name(0),
            fmt_shape(&x.shape)
        ));
    };
    let transposed = ctx.op == "DynamicQuantizeLSTM";
    let hidden = match ctx.attrs.get("hidden_size") {
        Some(_) => positive(ctx, "hidden_size", ctx.attr_int("hidden_size", 0)?)?,
        None => {
            let r = &ctx.input(2)?.shape;
            let at = if transposed {
                1
            } else {
                r.len().saturating_sub(1)
            };
            r.get(at).copied().unwrap_or(0)
        }
    };
    let gh = checked_dim_mul(gates, hidden, "gates x hidden")?;
    let expected_w = if transposed {
        vec![dirs, input, gh]
    } else {
        vec![dirs, gh, input]
    };
    if w.shape != expected_w {
        return msg(format!(
            "input 1 '{}' (W) has shape {} but direction '{direction}', hidden_size {hidden} and input size {input} need {}",
            ctx.name(1),
            fmt_shape(&w.shape),
            fmt_shape(&expected_w)
        ));
    }
    let (y, h) = if layout == 0 {
        (vec![seq, dirs, batch, hidden], vec![dirs, batch, hidden])
    } else {
        (vec![batch, seq, dirs, hidden], vec![batch, dirs, hidden])
    };
    let mut outs = vec![Info::new(x.dtype, y), Info::new(x.dtype, h.clone())];
    if gates == 4 {
        outs.push(Info::new(x.dtype, h));
    }
    Ok(outs)
}

/// Opset-23 Attention: Q, K, V, attn_mask, past_key, past_value → Y, present_key,
/// present_value, qk_matmul_output. 3-D inputs are (B, S, heads x head_size) with
/// `q_num_heads`/`kv_num_heads`; 4-D inputs are (B, heads, S, head_size).
fn attention(ctx: &Ctx) -> R<Vec<Info>> {
    let q = ctx.input(0)?;
    let k = ctx.input(1)?;
    let v = ctx.input(2)?;
    let split = |info: &Info, slot: usize, heads_attr: &str| -> R<[u64; 4]> {
        match info.shape[..] {
            [b, h, s, d] => Ok([b, h, s, d]),
            [b, s, hidden] => {
                let h = positive(ctx, heads_attr, ctx.attr_int(heads_attr, 0)?)?;
                if hidden % h != 0 {
                    return msg(format!(
                        "input {slot} '{}' hidden size {hidden} is not a multiple of {heads_attr} {h}",
                        ctx.name(slot)
                    ));
                }
                Ok([b, h, s, hidden / h])
            }
            _ => msg(format!(
                "input {slot} '{}' {} must be 3-D (B, S, hidden) or 4-D (B, heads, S, head_size)",
                ctx.name(slot),
                fmt_shape(&info.shape)
            )),
        }
    };
    let [b, qh, s, _] = split(q, 0, "q_num_heads")?;
    let [_, kvh, l, dk] = split(k, 1, "kv_num_heads")?;
    let [_, _, _, dv] = split(v, 2, "kv_num_heads")?;
    let past = ctx
        .opt_input(4)
        .map_or(0, |p| p.shape.get(2).copied().unwrap_or(0));
    let total = past
        .checked_add(l)
        .ok_or_else(|| NodeError::Msg("the total sequence length overflows".into()))?;
    let y = if q.shape.len() == 3 {
        vec![b, s, checked_dim_mul(qh, dv, "q_num_heads x head size")?]
    } else {
        vec![b, qh, s, dv]
    };
    Ok(vec![
        Info::new(q.dtype, y),
        Info::new(k.dtype, vec![b, kvh, total, dk]),
        Info::new(v.dtype, vec![b, kvh, total, dv]),
        Info::new(q.dtype, vec![b, qh, s, total]),
    ])
}

/// NonZero: (rank, count); the count is exact when X is known, else at most X's elements.
fn non_zero(ctx: &Ctx) -> R<Info> {
    let x = ctx.input(0)?;
    let rank = x.shape.len().max(1) as u64;
    if let Some(d) = &x.data {
        let hits: Vec<usize> = match d {
            Data::Ints(v) => v
                .iter()
                .enumerate()
                .filter(|(_, &e)| e != 0)
                .map(|(i, _)| i)
                .collect(),
            Data::Floats(v) => v
                .iter()
                .enumerate()
                .filter(|(_, &e)| e != 0.0)
                .map(|(i, _)| i)
                .collect(),
        };
        let n = hits.len() as u64;
        let shape = if x.shape.is_empty() {
            vec![1]
        } else {
            x.shape.clone()
        };
        let mut data = vec![0i64; (rank as usize) * hits.len()];
        for (j, &flat) in hits.iter().enumerate() {
            let mut rem = flat as u64;
            for axis in (0..shape.len()).rev() {
                let dim = shape[axis].max(1);
                data[axis * hits.len() + j] = (rem % dim) as i64;
                rem /= dim;
            }
        }
        return Ok(Info::with_data(
            DType::Int64,
            vec![rank, n],
            Some(Data::Ints(data)),
        ));
    }
    let n = elements(&x.shape)
        .ok_or_else(|| NodeError::Msg("input 0's element count overflows".into()))?;
    Ok(Info::bounded(
        DType::Int64,
        vec![rank, n],
        format!(
            "NonZero count <= the {n} elements of input 0 '{}'",
            ctx.name(0)
        ),
    ))
}

/// boxes (B, spatial, 4), scores (B, classes, spatial), max_output_boxes_per_class →
/// (selected <= B x classes x min(max_output, spatial), 3).
fn nms(ctx: &Ctx) -> R<Info> {
    let boxes = ctx.input(0)?;
    let scores = ctx.input(1)?;
    let ([b, spatial, _], [sb, classes, ss]) = (
        <[u64; 3]>::try_from(boxes.shape.as_slice()).unwrap_or([0, 0, 0]),
        <[u64; 3]>::try_from(scores.shape.as_slice()).unwrap_or([0, 0, 0]),
    );
    if boxes.shape.len() != 3 || scores.shape.len() != 3 || b != sb || spatial != ss {
        return msg(format!(
            "input 0 '{}' (boxes) {} and input 1 '{}' (scores) {} must be (batch, boxes, 4) and (batch, classes, boxes)",
            ctx.name(0),
            fmt_shape(&boxes.shape),
            ctx.name(1),
            fmt_shape(&scores.shape)
        ));
    }
    let (per_class, from) = match ctx.opt_input(2) {
        None => (0, "max_output_boxes_per_class is absent (0)".to_string()),
        Some(m) => match m.ints().and_then(|v| v.first().copied()) {
            Some(k) => (
                u64::try_from(k).unwrap_or(0).min(spatial),
                format!("max_output_boxes_per_class = {k}"),
            ),
            None => (
                spatial,
                format!(
                    "max_output_boxes_per_class is a runtime value; at most the {spatial} boxes"
                ),
            ),
        },
    };
    let n = checked_dim_mul(
        checked_dim_mul(b, classes, "batch x classes")?,
        per_class,
        "selected boxes",
    )?;
    Ok(Info::bounded(
        DType::Int64,
        vec![n, 3],
        format!("selected boxes <= batch {b} x classes {classes} x {per_class} ({from})"),
    ))
}

/// TopK: exact with a known K, else at most the whole axis.
fn top_k(ctx: &Ctx) -> R<Vec<Info>> {
    let x = ctx.input(0)?;
    let axis = ctx.axis("axis", ctx.attr_int("axis", -1)?, x.shape.len())?;
    let dim = x.shape[axis];
    let k = if ctx.opt_input(1).is_some() {
        match ctx.input(1)?.ints() {
            Some([k]) => Some(*k),
            Some(_) => return msg("input 1 (K) must hold one value"),
            None => None,
        }
    } else {
        Some(ctx.attr_int("k", -1)?)
    };
    let mut shape = x.shape.clone();
    let (values, indices) = match k {
        Some(k) => {
            let k = to_dim(i128::from(k), "K")?;
            if k > dim {
                return msg(format!("K = {k} exceeds dim {axis} of input 0 ({dim})"));
            }
            shape[axis] = k;
            (
                Info::new(x.dtype, shape.clone()),
                Info::new(DType::Int64, shape),
            )
        }
        None => {
            let why = format!(
                "K (input 1 '{}') is a runtime value; K <= dim {axis} of input 0 ({dim})",
                ctx.name(1)
            );
            (
                Info::bounded(x.dtype, shape.clone(), why.clone()),
                Info::bounded(DType::Int64, shape, why),
            )
        }
    };
    Ok(vec![values, indices])
}

/// Unique: Y, indices, inverse_indices, counts; the unique count is at most the elements
/// (or the axis' length).
fn unique(ctx: &Ctx) -> R<Vec<Info>> {
    let x = ctx.input(0)?;
    let total = elements(&x.shape)
        .ok_or_else(|| NodeError::Msg("input 0's element count overflows".into()))?;
    let (y, n, inverse) = match ctx.attrs.get("axis") {
        None => (vec![total], total, total),
        Some(_) => {
            let a = ctx.axis("axis", ctx.attr_int("axis", 0)?, x.shape.len())?;
            (x.shape.clone(), x.shape[a], x.shape[a])
        }
    };
    let why = format!("unique count <= {n} (input 0 '{}')", ctx.name(0));
    Ok(vec![
        Info::bounded(x.dtype, y, why.clone()),
        Info::bounded(DType::Int64, vec![n], why.clone()),
        Info::new(DType::Int64, vec![inverse]),
        Info::bounded(DType::Int64, vec![n], why),
    ])
}

/// Compress: the selected count is exact with a known condition, else at most the
/// condition's length and the axis (or all elements).
fn compress(ctx: &Ctx) -> R<Info> {
    let x = ctx.input(0)?;
    let cond = ctx.input(1)?;
    let len = cond.shape.first().copied().unwrap_or(1);
    let (mut shape, axis, dim) = match ctx.attrs.get("axis") {
        None => {
            let n = elements(&x.shape)
                .ok_or_else(|| NodeError::Msg("element count overflows".into()))?;
            (vec![n], 0, n)
        }
        Some(_) => {
            let a = ctx.axis("axis", ctx.attr_int("axis", 0)?, x.shape.len())?;
            (x.shape.clone(), a, x.shape[a])
        }
    };
    if let Some(c) = cond.ints() {
        shape[axis] = c.iter().take(dim as usize).filter(|&&v| v != 0).count() as u64;
        return Ok(Info::new(x.dtype, shape));
    }
    shape[axis] = len.min(dim);
    Ok(Info::bounded(
        x.dtype,
        shape.clone(),
        format!(
            "selected count <= {} (condition input 1 '{}' has {len} entries)",
            shape[axis],
            ctx.name(1)
        ),
    ))
}

/// DFT (opset 17 attribute axis, opset 20 axis input): the signal's last dim becomes 2
/// (real, imaginary); the transformed axis is `dft_length` (or the input's), and
/// `floor(n / 2) + 1` when `onesided`.
fn dft(ctx: &Ctx) -> R<Info> {
    let x = ctx.input(0)?;
    let rank = x.shape.len();
    if rank < 2 || !matches!(x.shape[rank - 1], 1 | 2) {
        return msg(format!(
            "input 0 '{}' {} must end in 1 (real) or 2 (complex)",
            ctx.name(0),
            fmt_shape(&x.shape)
        ));
    }
    let axis = match ctx.opt_input(2) {
        Some(_) => match ctx.ints_input(2, "axis")?[..] {
            [a] => a,
            _ => return msg("input 2 (axis) must hold one value"),
        },
        None => ctx.attr_int("axis", if ctx.opset >= 20 { -2 } else { 1 })?,
    };
    let axis = ctx.axis("axis", axis, rank)?;
    if axis == rank - 1 {
        return msg("axis is the last dim, which holds the real and imaginary parts");
    }
    let mut shape = x.shape.clone();
    if ctx.opt_input(1).is_some() {
        match ctx.ints_input(1, "dft_length")?[..] {
            [n] => shape[axis] = to_dim(i128::from(n), "dft_length")?,
            _ => return msg("input 1 (dft_length) must hold one value"),
        }
    }
    if ctx.attr_int("onesided", 0)? != 0 {
        shape[axis] = shape[axis] / 2 + 1;
    }
    shape[rank - 1] = 2;
    Ok(Info::new(x.dtype, shape))
}
