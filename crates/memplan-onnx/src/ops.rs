//! The registry of supported operators: the one list that decides whether a node's
//! operator is inferred (see [`crate::infer::infer_node`]) and that `doc/onnx.md`'s operator
//! table is generated from ([`markdown_table`]; the `operator_table` test fails when the
//! document is out of date).
//!
//! Every `(domain, operator)` listed here has a shape rule in [`crate::infer`]; a unit test
//! runs each one to check that it reaches its rule. An operator outside this list is refused
//! with [`crate::OnnxError::UnknownOperator`] naming it and its node.

/// The default ONNX domain (`""`, also spelled `"ai.onnx"` in files).
pub const ONNX: &str = "";
/// onnxruntime's contrib operators (quantized, fused transformer ops).
pub const MICROSOFT: &str = "com.microsoft";

/// A group of operators that share a shape rule family, for the documentation table.
#[derive(Clone, Copy, Debug)]
pub struct Family {
    /// [`ONNX`] or [`MICROSOFT`].
    pub domain: &'static str,
    /// Short name of the family (a table row).
    pub family: &'static str,
    /// What the rule covers beyond the operator names (attributes, optional outputs).
    pub notes: &'static str,
    /// Operator names (`op_type`).
    pub ops: &'static [&'static str],
}

/// Every supported operator, by family.
pub const FAMILIES: &[Family] = &[
    Family {
        domain: ONNX,
        family: "unary, same shape",
        notes: "Softmax/LogSoftmax/Hardmax/CumSum axes checked",
        ops: &[
            "Relu", "Sigmoid", "Tanh", "Erf", "Gelu", "Softmax", "LogSoftmax", "Hardmax", "Exp",
            "Log", "Sqrt", "Reciprocal", "Neg", "Abs", "Floor", "Ceil", "Round", "Sign", "Sin",
            "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
            "LeakyRelu", "PRelu", "Elu", "Selu", "Celu", "HardSigmoid", "HardSwish", "Softplus",
            "Softsign", "Mish", "Swish", "ThresholdedRelu", "Shrink", "Clip", "LRN",
            "InstanceNormalization", "GroupNormalization", "MeanVarianceNormalization",
            "LpNormalization", "CumSum", "Trilu", "Not", "BitwiseNot", "Identity", "Dropout",
            "IsNaN", "IsInf", "ScatterND", "ScatterElements", "Scatter", "ReverseSequence",
            "Bernoulli", "RandomNormalLike", "RandomUniformLike", "EyeLike", "CumProd",
        ],
    },
    Family {
        domain: ONNX,
        family: "binary / variadic, numpy broadcasting",
        notes: "comparisons and logic give BOOL",
        ops: &[
            "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean", "BitShift",
            "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Equal", "Less", "Greater", "LessOrEqual",
            "GreaterOrEqual", "And", "Or", "Xor", "Where",
        ],
    },
    Family {
        domain: ONNX,
        family: "linear algebra",
        notes: "MatMul 1-D promotion and batch broadcasting; Gemm transA/transB; Einsum without `...`",
        ops: &["MatMul", "Gemm", "Einsum", "Det"],
    },
    Family {
        domain: ONNX,
        family: "convolution",
        notes: "pads, strides, dilations, group, auto_pad, output_padding, output_shape",
        ops: &["Conv", "ConvTranspose", "Col2Im", "DeformConv"],
    },
    Family {
        domain: ONNX,
        family: "pooling and sampling",
        notes: "ceil_mode, MaxPool indices; RoiAlign output_height/width; GridSample and AffineGrid",
        ops: &[
            "MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool",
            "GlobalLpPool", "MaxRoiPool", "RoiAlign", "MaxUnpool", "GridSample", "AffineGrid",
        ],
    },
    Family {
        domain: ONNX,
        family: "normalisation",
        notes: "LayerNormalization + Mean, InvStdDev; RMSNormalization",
        ops: &[
            "BatchNormalization", "LayerNormalization", "RMSNormalization",
            "SimplifiedLayerNormalization",
        ],
    },
    Family {
        domain: ONNX,
        family: "recurrent",
        notes: "Y, Y_h (and Y_c); forward, reverse, bidirectional; layout 0 and 1",
        ops: &["LSTM", "GRU", "RNN"],
    },
    Family {
        domain: ONNX,
        family: "attention",
        notes: "opset 23 Attention (3-D and 4-D, present key/value, qk output), RotaryEmbedding",
        ops: &["Attention", "RotaryEmbedding"],
    },
    Family {
        domain: ONNX,
        family: "signal and losses",
        notes: "DFT dft_length/axis/onesided; windows and MelWeightMatrix need their size inputs; losses with reduction none/mean/sum",
        ops: &[
            "DFT", "HannWindow", "HammingWindow", "BlackmanWindow", "MelWeightMatrix",
            "SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss",
        ],
    },
    Family {
        domain: ONNX,
        family: "shape",
        notes: "Reshape 0/-1/allowzero; Slice negative, clamped, stepped; Split sizes/num_outputs; Resize scales/sizes/axes/keep_aspect_ratio_policy",
        ops: &[
            "Shape", "Size", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Expand",
            "Concat", "Split", "Slice", "Gather", "GatherElements", "GatherND", "Tile", "Pad",
            "Resize", "Upsample", "DepthToSpace", "SpaceToDepth", "CenterCropPad", "OneHot",
        ],
    },
    Family {
        domain: ONNX,
        family: "reductions",
        notes: "axes attribute or input, keepdims, noop_with_empty_axes",
        ops: &[
            "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
            "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin",
        ],
    },
    Family {
        domain: ONNX,
        family: "data-dependent sizes, planned at an upper bound",
        notes: "NonZero <= elements, NonMaxSuppression <= max_output_boxes_per_class x batches x classes, TopK with a runtime k <= the dim, Unique/Compress <= elements; else --max-dim",
        ops: &["NonZero", "NonMaxSuppression", "TopK", "Unique", "Compress"],
    },
    Family {
        domain: ONNX,
        family: "control flow",
        notes: "sub-graphs inferred; bodies become steps <node>/<attr>/<inner> between the node and <node>/end (If: taken branch or both in turn; Loop, Scan: one iteration); outer values a body reads become node inputs; If: chosen branch or both (larger size, bounded); Loop: scan outputs x trip count (M or --max-dim); Scan: stacked along the scan length",
        ops: &["If", "Loop", "Scan"],
    },
    Family {
        domain: ONNX,
        family: "quantization",
        notes: "per-tensor, per-axis, blocked; output_dtype; INT4/UINT4 packed two per byte",
        ops: &[
            "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearConv",
            "QLinearMatMul", "MatMulInteger", "ConvInteger",
        ],
    },
    Family {
        domain: ONNX,
        family: "constants, types and generators",
        notes: "Constant value, value_int(s), value_float(s)",
        ops: &[
            "Constant", "ConstantOfShape", "Range", "Cast", "CastLike", "RandomNormal",
            "RandomUniform", "Multinomial",
        ],
    },
    Family {
        domain: MICROSOFT,
        family: "quantization (onnxruntime QOperator format)",
        notes: "channels_last for QLinearGlobalAveragePool; MatMulNBits K, N, bits, block_size",
        ops: &[
            "QuantizeLinear", "DequantizeLinear", "QLinearAdd", "QLinearMul",
            "QLinearGlobalAveragePool", "QLinearAveragePool", "QLinearConcat", "QLinearSigmoid",
            "QLinearLeakyRelu", "QLinearSoftmax", "QLinearConv", "QGemm", "MatMulNBits",
            "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QLinearWhere", "QAttention",
            "QEmbedLayerNormalization", "DynamicQuantizeLSTM",
        ],
    },
    Family {
        domain: MICROSOFT,
        family: "fused transformer ops (onnxruntime.transformers)",
        notes: "Attention present; MultiHeadAttention packed QKV/KV, BNSH keys, present_key/value; GroupQueryAttention kv_num_heads, present_key/value; SkipLayerNormalization mean, inv_std_var, input_skip_bias_sum; EmbedLayerNormalization mask_index, embedding_sum",
        ops: &[
            "Attention", "MultiHeadAttention", "GroupQueryAttention", "RotaryEmbedding",
            "SkipLayerNormalization", "SkipSimplifiedLayerNormalization",
            "SimplifiedLayerNormalization", "LayerNormalization", "EmbedLayerNormalization",
            "BiasGelu", "FastGelu", "Gelu", "QuickGelu", "BiasAdd", "BiasDropout",
            "FusedConv", "FusedGemm", "FusedMatMul",
        ],
    },
];

/// True when `(domain, op)` is in the registry; `"ai.onnx"` counts as the default domain.
pub fn is_supported(domain: &str, op: &str) -> bool {
    let domain = canonical_domain(domain);
    FAMILIES
        .iter()
        .any(|f| f.domain == domain && f.ops.contains(&op))
}

/// `""` for the default domain however the file spells it, else the domain itself.
pub fn canonical_domain(domain: &str) -> &str {
    if domain == "ai.onnx" {
        ONNX
    } else {
        domain
    }
}

/// Number of supported `(domain, operator)` pairs.
pub fn count() -> usize {
    FAMILIES.iter().map(|f| f.ops.len()).sum()
}

/// The operator table of `doc/onnx.md` (between its `<!-- operators -->` markers), generated
/// from [`FAMILIES`].
pub fn markdown_table() -> String {
    let mut out = format!(
        "{} operators ({} in the default domain, {} in `com.microsoft`).\n\n| domain | family | operators | notes |\n| --- | --- | --- | --- |\n",
        count(),
        FAMILIES
            .iter()
            .filter(|f| f.domain == ONNX)
            .map(|f| f.ops.len())
            .sum::<usize>(),
        FAMILIES
            .iter()
            .filter(|f| f.domain == MICROSOFT)
            .map(|f| f.ops.len())
            .sum::<usize>(),
    );
    for f in FAMILIES {
        let domain = if f.domain.is_empty() {
            "ai.onnx"
        } else {
            f.domain
        };
        out.push_str(&format!(
            "| {domain} | {} | {} | {} |\n",
            f.family,
            f.ops.join(", "),
            f.notes
        ));
    }
    out
}
