//! Quantization operators of the default domain (QuantizeLinear, DequantizeLinear,
//! DynamicQuantizeLinear, QLinearConv, QLinearMatMul, MatMulInteger, ConvInteger); the
//! `com.microsoft` versions of QuantizeLinear/DequantizeLinear share these rules.

use memplan_graph::DType;

use super::{conv_at, fmt_shape, matmul_at, msg, Ctx, Info, NodeError, R};

/// The quantization operators of the default domain; `None` for any other operator.
pub(super) fn infer(ctx: &Ctx) -> R<Option<Vec<Info>>> {
    Ok(Some(match ctx.op {
        "QuantizeLinear" => vec![quantize_linear(ctx)?],
        "DequantizeLinear" => vec![dequantize_linear(ctx)?],
        "DynamicQuantizeLinear" => {
            let x = ctx.input(0)?;
            vec![
                Info::new(DType::Uint8, x.shape.clone()),
                Info::new(DType::Float, vec![]),
                Info::new(DType::Uint8, vec![]),
            ]
        }
        // x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B
        "QLinearConv" => {
            let dtype = out_dtype(ctx, 7, 0)?;
            vec![Info::new(dtype, conv_at(ctx, 0, 3)?)]
        }
        // a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point
        "QLinearMatMul" => {
            let dtype = out_dtype(ctx, 7, 0)?;
            vec![Info::new(dtype, matmul_at(ctx, 0, 3)?)]
        }
        "MatMulInteger" => vec![Info::new(DType::Int32, matmul_at(ctx, 0, 1)?)],
        "ConvInteger" => vec![Info::new(DType::Int32, conv_at(ctx, 0, 1)?)],
        _ => return Ok(None),
    }))
}

/// The dtype of the zero point in `zp_slot` when given, else that of input `else_slot`.
pub(super) fn out_dtype(ctx: &Ctx, zp_slot: usize, else_slot: usize) -> R<DType> {
    Ok(match ctx.opt_input(zp_slot) {
        Some(zp) => zp.dtype,
        None => ctx.input(else_slot)?.dtype,
    })
}

/// `output_dtype` attribute as a type, `None` when absent or 0.
fn output_dtype_attr(ctx: &Ctx) -> R<Option<DType>> {
    let code = ctx.attr_int("output_dtype", 0)?;
    if code == 0 {
        return Ok(None);
    }
    i32::try_from(code)
        .ok()
        .and_then(DType::from_onnx_code)
        .filter(|t| *t != DType::String)
        .map(Some)
        .ok_or_else(|| {
            NodeError::Msg(format!(
                "attribute 'output_dtype' is {code}, not a known TensorProto.DataType"
            ))
        })
}

/// Checks that the scale (and zero point) fit the data: per-tensor (one value), per-axis
/// (1-D of the axis' length) or blocked (`block_size > 0`: same rank, the axis divided into
/// blocks of `block_size`).
pub(super) fn check_params(ctx: &Ctx, x_slot: usize, scale_slot: usize, zp_slot: usize) -> R<()> {
    let x = ctx.input(x_slot)?;
    let scale = ctx.input(scale_slot)?;
    let rank = x.shape.len();
    let block = ctx.attr_int("block_size", 0)?;
    let per_tensor = scale.shape.is_empty() || scale.shape == [1];
    if !per_tensor || block > 0 {
        // The default axis is 1; a 1-D tensor (a per-channel bias) without the attribute
        // is quantized along its only axis, as onnxruntime does.
        let default = if rank == 1 { 0 } else { 1 };
        let axis = ctx.axis("axis", ctx.attr_int("axis", default)?, rank)?;
        if block < 0 {
            return msg(format!(
                "attribute 'block_size' is {block}; it must be 0 or positive"
            ));
        }
        let expected: Vec<u64> = if block > 0 {
            let mut e = x.shape.clone();
            e[axis] = x.shape[axis].div_ceil(block as u64);
            e
        } else {
            vec![x.shape[axis]]
        };
        if scale.shape != expected {
            return msg(format!(
                "input {scale_slot} '{}' (scale) has shape {} but input {x_slot} '{}' {} with axis {axis}{} needs {} ({}); give one scale per tensor, one per element of the axis, or one per block",
                ctx.name(scale_slot),
                fmt_shape(&scale.shape),
                ctx.name(x_slot),
                fmt_shape(&x.shape),
                if block > 0 { format!(" and block_size {block}") } else { String::new() },
                fmt_shape(&expected),
                if block > 0 { "blocked" } else { "per-axis" }
            ));
        }
    }
    if let Some(zp) = ctx.opt_input(zp_slot) {
        if zp.shape != scale.shape && !(zp.shape.iter().product::<u64>() == 1 && per_tensor) {
            return msg(format!(
                "input {zp_slot} '{}' (zero point) has shape {} but the scale '{}' has {}; they must match",
                ctx.name(zp_slot),
                fmt_shape(&zp.shape),
                ctx.name(scale_slot),
                fmt_shape(&scale.shape)
            ));
        }
    }
    Ok(())
}

fn quantize_linear(ctx: &Ctx) -> R<Info> {
    let x = ctx.input(0)?;
    check_params(ctx, 0, 1, 2)?;
    let attr = output_dtype_attr(ctx)?;
    let dtype = match (ctx.opt_input(2), attr) {
        (Some(zp), Some(t)) if zp.dtype != t => {
            return msg(format!(
                "attribute 'output_dtype' is {t} but input 2 '{}' (zero point) is {}; they must agree (or drop one)",
                ctx.name(2),
                zp.dtype
            ))
        }
        (Some(zp), _) => zp.dtype,
        (None, Some(t)) => t,
        (None, None) => DType::Uint8,
    };
    Ok(Info::new(dtype, x.shape.clone()))
}

fn dequantize_linear(ctx: &Ctx) -> R<Info> {
    let x = ctx.input(0)?;
    check_params(ctx, 0, 1, 2)?;
    let scale = ctx.input(1)?;
    let dtype = output_dtype_attr(ctx)?.unwrap_or(scale.dtype);
    Ok(Info::new(dtype, x.shape.clone()))
}
