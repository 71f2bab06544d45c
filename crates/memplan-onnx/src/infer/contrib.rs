//! onnxruntime's `com.microsoft` contrib operators: the QOperator quantization format
//! (QLinearAdd, QGemm, MatMulNBits, …) and the fused transformer operators written by
//! `onnxruntime.transformers` (Attention, MultiHeadAttention, GroupQueryAttention,
//! SkipLayerNormalization, EmbedLayerNormalization, FastGelu, …). Shapes follow
//! onnxruntime's `docs/ContribOperators.md` and its kernels, checked against onnxruntime
//! runs by `scripts/onnx_fixtures.py`.

use memplan_graph::DType;

use super::{
    broadcast, concat_at, conv_at, fmt_shape, gemm_at, layer_norm, matmul_at, msg, pool, quant,
    Ctx, Info, NodeError, R,
};

/// Infers a `com.microsoft` operator listed in [`crate::ops`].
pub(super) fn infer(ctx: &Ctx) -> R<Vec<Info>> {
    Ok(match ctx.op {
        "QuantizeLinear" | "DequantizeLinear" => quant::infer(ctx)?.unwrap_or_default(),
        // A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point
        "QLinearAdd" | "QLinearMul" => {
            let a = ctx.input(0)?;
            let b = ctx.input(3)?;
            let shape = broadcast(&[(0, &a.shape), (3, &b.shape)]).map_err(NodeError::Msg)?;
            vec![Info::new(a.dtype, shape)]
        }
        "QLinearSigmoid" | "QLinearLeakyRelu" | "QLinearSoftmax" | "RotaryEmbedding"
        | "BiasGelu" | "FastGelu" | "Gelu" | "QuickGelu" | "BiasAdd" => {
            let x = ctx.input(0)?;
            vec![Info::new(x.dtype, x.shape.clone())]
        }
        "BiasDropout" => {
            let x = ctx.input(0)?;
            vec![
                Info::new(x.dtype, x.shape.clone()),
                Info::new(DType::Bool, x.shape.clone()),
            ]
        }
        "QLinearGlobalAveragePool" => {
            let x = ctx.input(0)?;
            if x.shape.len() < 3 {
                return msg(format!(
                    "input 0 '{}' has shape {}; it needs (N, C, spatial...) or, with channels_last, (N, spatial..., C)",
                    ctx.name(0),
                    fmt_shape(&x.shape)
                ));
            }
            let last = ctx.attr_int("channels_last", 0)? != 0;
            let r = x.shape.len();
            let spatial = if last { 1..r - 1 } else { 2..r };
            let mut shape = x.shape.clone();
            shape[spatial].iter_mut().for_each(|d| *d = 1);
            vec![Info::new(x.dtype, shape)]
        }
        // X, x_scale, x_zero_point, y_scale, y_zero_point
        "QLinearAveragePool" => {
            let x = ctx.input(0)?;
            if ctx.attr_int("channels_last", 0)? != 0 && x.shape.len() >= 3 {
                // Pool the NCHW view, then move the channels back to the end.
                let r = x.shape.len();
                let mut nchw = vec![x.shape[0], x.shape[r - 1]];
                nchw.extend_from_slice(&x.shape[1..r - 1]);
                let view = Info::new(x.dtype, nchw);
                let ins = [Some(&view)];
                let sub = Ctx {
                    inputs: &ins,
                    ..*ctx
                };
                let out = pool(&sub)?;
                let s = &out[0].shape;
                let mut nhwc = vec![s[0]];
                nhwc.extend_from_slice(&s[2..]);
                nhwc.push(s[1]);
                vec![Info::new(x.dtype, nhwc)]
            } else {
                pool(ctx)?.into_iter().take(1).collect()
            }
        }
        // Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input.
        "QLinearConcat" => {
            let n = ctx.inputs.len();
            if n < 5 || !(n - 2).is_multiple_of(3) {
                return msg(format!(
                    "QLinearConcat takes Y_scale, Y_zero_point and then triples (X, X_scale, X_zero_point); the node has {n} inputs"
                ));
            }
            let slots: Vec<usize> = (2..n).step_by(3).collect();
            vec![concat_at(ctx, &slots)?]
        }
        // x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B
        "QLinearConv" => {
            let dtype = quant::out_dtype(ctx, 7, 0)?;
            vec![Info::new(dtype, conv_at(ctx, 0, 3)?)]
        }
        // A, a_scale, a_zero_point, B, b_scale, b_zero_point, C, y_scale, y_zero_point
        "QGemm" => {
            let dtype = if ctx.opt_input(7).is_some() {
                quant::out_dtype(ctx, 8, 0)?
            } else {
                DType::Float
            };
            vec![Info::new(dtype, gemm_at(ctx, 0, 3)?)]
        }
        // A, B (packed), scales, zero_points, g_idx, bias; attributes K, N, bits, block_size.
        "MatMulNBits" => {
            let a = ctx.input(0)?;
            let k = ctx.attr_int("K", -1)?;
            let n = ctx.attr_int("N", -1)?;
            let (Ok(k), Ok(n)) = (u64::try_from(k), u64::try_from(n)) else {
                return msg(format!(
                    "attributes 'K' ({k}) and 'N' ({n}) are required and must be non-negative"
                ));
            };
            match a.shape.last() {
                Some(&last) if last == k => {}
                _ => {
                    return msg(format!(
                        "input 0 '{}' {} must end in K = {k}",
                        ctx.name(0),
                        fmt_shape(&a.shape)
                    ))
                }
            }
            let mut shape = a.shape.clone();
            if let Some(l) = shape.last_mut() {
                *l = n;
            }
            vec![Info::new(a.dtype, shape)]
        }
        // A, B, b_scale, b_zero_point, bias
        "DynamicQuantizeMatMul" => {
            vec![Info::new(ctx.input(0)?.dtype, matmul_at(ctx, 0, 1)?)]
        }
        // A, B, a_scale, b_scale, a_zero_point, b_zero_point, bias
        "MatMulIntegerToFloat" => {
            vec![Info::new(ctx.input(2)?.dtype, matmul_at(ctx, 0, 1)?)]
        }
        "FusedMatMul" => vec![fused_matmul(ctx)?],
        "FusedConv" => vec![Info::new(ctx.input(0)?.dtype, conv_at(ctx, 0, 1)?)],
        "FusedGemm" => vec![Info::new(ctx.input(0)?.dtype, gemm_at(ctx, 0, 1)?)],
        "SimplifiedLayerNormalization" | "LayerNormalization" => layer_norm(ctx)?,
        "SkipLayerNormalization" | "SkipSimplifiedLayerNormalization" => skip_layer_norm(ctx)?,
        "EmbedLayerNormalization" => embed_layer_norm(ctx)?,
        "Attention" => attention(ctx, 4, None)?,
        // input, weight, bias, input_scale, weight_scale, mask_index, input_zero_point,
        // weight_zero_point, past: Attention on quantized operands, float output.
        "QAttention" => attention(ctx, 8, Some(ctx.input(3)?.dtype))?,
        "QEmbedLayerNormalization" => {
            let mut outs = embed_layer_norm(ctx)?;
            outs[0].dtype = DType::Float;
            outs.truncate(2);
            outs
        }
        // condition, X, x_scale, x_zero_point, Y, y_scale, y_zero_point, z_scale, z_zero_point
        "QLinearWhere" => {
            let c = ctx.input(0)?;
            let x = ctx.input(1)?;
            let y = ctx.input(4)?;
            let shape = broadcast(&[(0, &c.shape), (1, &x.shape), (4, &y.shape)])
                .map_err(NodeError::Msg)?;
            vec![Info::new(quant::out_dtype(ctx, 8, 1)?, shape)]
        }
        "DynamicQuantizeLSTM" => super::extra::recurrent(ctx)?,
        "MultiHeadAttention" => multi_head_attention(ctx)?,
        "GroupQueryAttention" => group_query_attention(ctx)?,
        _ => {
            return Err(NodeError::Unsupported(
                "it is listed in memplan_onnx::ops but has no shape rule (a memplan bug)".into(),
            ))
        }
    })
}

/// `FusedMatMul`: MatMul with `transA`/`transB` (the last two dims swapped first).
fn fused_matmul(ctx: &Ctx) -> R<Info> {
    let swap = |slot: usize, attr: &str| -> R<Info> {
        let x = ctx.input(slot)?;
        let mut x = Info::new(x.dtype, x.shape.clone());
        if ctx.attr_int(attr, 0)? != 0 {
            let r = x.shape.len();
            if r < 2 {
                return msg(format!(
                    "attribute '{attr}' transposes input {slot}, which has rank {r}"
                ));
            }
            x.shape.swap(r - 1, r - 2);
        }
        Ok(x)
    };
    let a = swap(0, "transA")?;
    let b = swap(1, "transB")?;
    let ins = [Some(&a), Some(&b)];
    let sub = Ctx {
        inputs: &ins,
        ..*ctx
    };
    Ok(Info::new(a.dtype, matmul_at(&sub, 0, 1)?))
}

/// `a + b`, an error on overflow.
fn add(a: u64, b: u64) -> R<u64> {
    a.checked_add(b)
        .ok_or_else(|| NodeError::Msg(format!("{a} + {b} overflows")))
}

/// `a x b`, an error on overflow.
fn mul(a: u64, b: u64) -> R<u64> {
    super::checked_dim_mul(a, b, "a head size or sequence length")
}

/// The shape with its last dim replaced by 1 (per-row statistics).
fn rows(shape: &[u64]) -> Vec<u64> {
    let mut s = shape.to_vec();
    if let Some(l) = s.last_mut() {
        *l = 1;
    }
    s
}

/// input, skip, gamma, beta, bias → output, mean, inv_std_var, input_skip_bias_sum
/// (SkipSimplifiedLayerNormalization: input, skip, gamma, bias).
fn skip_layer_norm(ctx: &Ctx) -> R<Vec<Info>> {
    let x = ctx.input(0)?;
    let skip = ctx.input(1)?;
    if broadcast(&[(0, &x.shape), (1, &skip.shape)]).ok().as_ref() != Some(&x.shape) {
        return msg(format!(
            "input 1 '{}' (skip) {} does not broadcast to input 0 '{}' {}",
            ctx.name(1),
            fmt_shape(&skip.shape),
            ctx.name(0),
            fmt_shape(&x.shape)
        ));
    }
    Ok(vec![
        Info::new(x.dtype, x.shape.clone()),
        Info::new(DType::Float, rows(&x.shape)),
        Info::new(DType::Float, rows(&x.shape)),
        Info::new(x.dtype, x.shape.clone()),
    ])
}

/// input_ids, segment_ids, word_embedding, position_embedding, segment_embedding, gamma,
/// beta, mask, position_ids → output, mask_index, embedding_sum.
fn embed_layer_norm(ctx: &Ctx) -> R<Vec<Info>> {
    let ids = ctx.input(0)?;
    let word = ctx.input(2)?;
    if ids.shape.len() != 2 || word.shape.len() != 2 {
        return msg(format!(
            "input 0 '{}' (input_ids) must be (batch, sequence) and input 2 '{}' (word_embedding) (vocabulary, hidden); got {} and {}",
            ctx.name(0),
            ctx.name(2),
            fmt_shape(&ids.shape),
            fmt_shape(&word.shape)
        ));
    }
    let out = vec![ids.shape[0], ids.shape[1], word.shape[1]];
    Ok(vec![
        Info::new(word.dtype, out.clone()),
        Info::new(DType::Int32, vec![ids.shape[0]]),
        Info::new(word.dtype, out),
    ])
}

fn num_heads(ctx: &Ctx, attr: &str) -> R<u64> {
    let n = ctx.attr_int(attr, 0)?;
    u64::try_from(n).ok().filter(|&n| n > 0).ok_or_else(|| {
        NodeError::Msg(format!(
            "attribute '{attr}' is {n}; it is required and must be positive"
        ))
    })
}

fn heads_of(ctx: &Ctx, what: &str, hidden: u64, heads: u64) -> R<u64> {
    if !hidden.is_multiple_of(heads) {
        return msg(format!(
            "{what} hidden size {hidden} is not a multiple of num_heads {heads}"
        ));
    }
    let _ = ctx;
    Ok(hidden / heads)
}

/// input, weights, bias, mask_index, past, attention_bias, past_sequence_length →
/// output (B, S, v_hidden), present (2, B, N, P + S, head_size). `past_slot` is where the
/// past sits (4; 8 for QAttention); `dtype` the output type (the input's when `None`).
fn attention(ctx: &Ctx, past_slot: usize, dtype: Option<DType>) -> R<Vec<Info>> {
    let x = ctx.input(0)?;
    let out_dtype = dtype.unwrap_or(x.dtype);
    let heads = num_heads(ctx, "num_heads")?;
    if x.shape.len() != 3 {
        return msg(format!(
            "input 0 '{}' {} must be (batch, sequence, input_hidden)",
            ctx.name(0),
            fmt_shape(&x.shape)
        ));
    }
    let (b, s) = (x.shape[0], x.shape[1]);
    let (k_hidden, v_hidden) = match ctx.attr_ints("qkv_hidden_sizes")? {
        Some(h) if h.len() == 3 && h.iter().all(|&v| v > 0) => (h[1] as u64, h[2] as u64),
        Some(h) => {
            return msg(format!(
                "attribute 'qkv_hidden_sizes' is {h:?}; it needs three positive sizes"
            ))
        }
        None => {
            let w = ctx.input(1)?;
            match w.shape.as_slice() {
                [_, three_h] if three_h % 3 == 0 => (three_h / 3, three_h / 3),
                _ => {
                    return msg(format!(
                        "input 1 '{}' (weights) {} must be (input_hidden, 3 x hidden)",
                        ctx.name(1),
                        fmt_shape(&w.shape)
                    ))
                }
            }
        }
    };
    let head = heads_of(ctx, "key", k_hidden, heads)?;
    let mut outs = vec![Info::new(out_dtype, vec![b, s, v_hidden])];
    if ctx.n_outputs > 1 {
        let present = match ctx.opt_input(past_slot) {
            Some(p) if ctx.attr_int("past_present_share_buffer", 0)? != 0 => p.shape.clone(),
            Some(p) => match p.shape.as_slice() {
                [2, _, _, past, _] => vec![2, b, heads, add(*past, s)?, head],
                _ => {
                    return msg(format!(
                        "input {past_slot} '{}' (past) {} must be (2, batch, num_heads, past_sequence, head_size)",
                        ctx.name(past_slot),
                        fmt_shape(&p.shape)
                    ))
                }
            },
            None => vec![2, b, heads, s, head],
        };
        outs.push(Info::new(out_dtype, present));
    }
    Ok(outs)
}

/// query, key, value, bias, key_padding_mask, attention_bias, past_key, past_value, … →
/// output, present_key, present_value, qk.
fn multi_head_attention(ctx: &Ctx) -> R<Vec<Info>> {
    let q = ctx.input(0)?;
    let n = num_heads(ctx, "num_heads")?;
    let key = ctx.opt_input(1);
    let value = ctx.opt_input(2);
    let bad = |what: String| -> R<Vec<Info>> { msg(what) };
    // (batch, q_sequence, kv_sequence, key head size, value head size)
    let (b, s, l, hk, hv) = match (q.shape.as_slice(), key.map(|k| k.shape.as_slice())) {
        // Packed QKV: (B, S, N, 3, H).
        ([b, s, _, 3, h], None) => (*b, *s, *s, *h, *h),
        ([b, s, d], Some([_, l, _, 2, h])) => {
            let _ = d;
            (*b, *s, *l, *h, *h)
        }
        ([b, s, d], Some([_, l, _])) => {
            let v = value.ok_or_else(|| NodeError::Msg("input 2 (value) is missing".into()))?;
            let dv = v.shape.last().copied().unwrap_or(0);
            (*b, *s, *l, heads_of(ctx, "query", *d, n)?, heads_of(ctx, "value", dv, n)?)
        }
        ([b, s, d], Some([_, _, l, _])) => {
            let v = value.ok_or_else(|| NodeError::Msg("input 2 (value) is missing".into()))?;
            let hv = v.shape.last().copied().unwrap_or(0);
            (*b, *s, *l, heads_of(ctx, "query", *d, n)?, hv)
        }
        (qs, ks) => {
            return bad(format!(
                "input 0 '{}' (query) {} with key {} is none of the layouts MultiHeadAttention takes: query (B, S, D) with key (B, L, D), (B, N, L, H) or packed (B, L, N, 2, H), or packed query (B, S, N, 3, H) without key",
                ctx.name(0),
                fmt_shape(qs),
                ks.map_or("absent".to_string(), fmt_shape)
            ))
        }
    };
    let past = match ctx.opt_input(6) {
        Some(p) if p.shape.len() == 4 => p.shape[2],
        Some(p) => {
            return bad(format!(
                "input 6 '{}' (past_key) {} must be (B, N, P, H)",
                ctx.name(6),
                fmt_shape(&p.shape)
            ))
        }
        None => 0,
    };
    let total = past
        .checked_add(l)
        .ok_or_else(|| NodeError::Msg("the total sequence length overflows".into()))?;
    let dv = n
        .checked_mul(hv)
        .ok_or_else(|| NodeError::Msg("the output hidden size overflows".into()))?;
    Ok(vec![
        Info::new(q.dtype, vec![b, s, dv]),
        Info::new(q.dtype, vec![b, n, total, hk]),
        Info::new(q.dtype, vec![b, n, total, hv]),
        Info::new(q.dtype, vec![b, n, s, total]),
    ])
}

/// query, key, value, past_key, past_value, seqlens_k, total_sequence_length, cos_cache,
/// sin_cache, … → output, present_key, present_value.
fn group_query_attention(ctx: &Ctx) -> R<Vec<Info>> {
    let q = ctx.input(0)?;
    let n = num_heads(ctx, "num_heads")?;
    let kv_n = num_heads(ctx, "kv_num_heads")?;
    let [b, s, d] = q.shape[..] else {
        return msg(format!(
            "input 0 '{}' (query) {} must be (batch, sequence, hidden)",
            ctx.name(0),
            fmt_shape(&q.shape)
        ));
    };
    let head = if ctx.opt_input(1).is_some() {
        heads_of(ctx, "query", d, n)?
    } else {
        // Packed QKV: hidden = (num_heads + 2 x kv_num_heads) x head_size.
        heads_of(ctx, "packed QKV", d, add(n, mul(2, kv_n)?)?)?
    };
    let past = match ctx.opt_input(3) {
        Some(p) if p.shape.len() == 4 => p.shape[2],
        Some(p) => {
            return msg(format!(
                "input 3 '{}' (past_key) {} must be (B, kv_num_heads, P, H)",
                ctx.name(3),
                fmt_shape(&p.shape)
            ))
        }
        None => 0,
    };
    // Present length: max(total_sequence_length, past buffer) (onnxruntime's helper).
    let total = match ctx
        .opt_input(6)
        .and_then(|t| t.ints())
        .and_then(|v| v.first())
    {
        Some(&t) => Some(u64::try_from(t).map_err(|_| {
            NodeError::Msg(format!("input 6 (total_sequence_length) is negative ({t})"))
        })?),
        None => None,
    };
    let (present, bound) = match total {
        Some(t) => (t.max(past), None),
        // Unknown at import: the past buffer plus this step's tokens bounds it.
        None => (
            add(past, s)?,
            Some(format!(
                "total_sequence_length (input 6 '{}') is a runtime value; present length <= past ({past}) + sequence ({s})",
                ctx.name(6)
            )),
        ),
    };
    let kv = |shape: Vec<u64>| match &bound {
        Some(why) => Info::bounded(q.dtype, shape, why.clone()),
        None => Info::new(q.dtype, shape),
    };
    Ok(vec![
        Info::new(q.dtype, vec![b, s, mul(n, head)?]),
        kv(vec![b, kv_n, present, head]),
        kv(vec![b, kv_n, present, head]),
    ])
}
