//! Unit tests of shape inference and folding, one group per operator family.

use std::collections::BTreeMap;

use memplan_graph::{Attribute, DType};

use super::*;

fn f32s(shape: &[u64]) -> Info {
    Info::new(DType::Float, shape.to_vec())
}

fn ints(values: &[i64]) -> Info {
    Info::with_data(
        DType::Int64,
        vec![values.len() as u64],
        Some(Data::Ints(values.to_vec())),
    )
}

fn scalar(v: i64) -> Info {
    Info::with_data(DType::Int64, vec![], Some(Data::Ints(vec![v])))
}

/// Runs `op` on `inputs` (None = omitted) with `attrs`, expecting `n_outputs` outputs
/// (default domain, opset 17).
fn run_n(
    op: &str,
    inputs: &[Option<Info>],
    attrs: &[(&str, Attribute)],
    n_outputs: usize,
) -> Result<Vec<Info>, NodeError> {
    run_full("", op, inputs, attrs, n_outputs, None, 17)
}

/// Runs `op` of `domain` under `opset`, with `max_dim`.
fn run_full(
    domain: &str,
    op: &str,
    inputs: &[Option<Info>],
    attrs: &[(&str, Attribute)],
    n_outputs: usize,
    max_dim: Option<u64>,
    opset: i64,
) -> Result<Vec<Info>, NodeError> {
    let names: Vec<String> = (0..inputs.len()).map(|i| format!("in{i}")).collect();
    let refs: Vec<Option<&Info>> = inputs.iter().map(Option::as_ref).collect();
    let attrs: BTreeMap<String, Attribute> = attrs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    infer_node(&Ctx {
        op,
        domain,
        input_names: &names,
        inputs: &refs,
        attrs: &attrs,
        n_outputs,
        opset,
        max_dim,
    })
}

fn run(op: &str, inputs: &[Info], attrs: &[(&str, Attribute)]) -> Result<Info, NodeError> {
    let inputs: Vec<Option<Info>> = inputs.iter().cloned().map(Some).collect();
    run_n(op, &inputs, attrs, 1).map(|mut v| v.remove(0))
}

fn shape(op: &str, inputs: &[Info], attrs: &[(&str, Attribute)]) -> Vec<u64> {
    run(op, inputs, attrs)
        .unwrap_or_else(|e| panic!("{op}: {e:?}"))
        .shape
}

fn err(op: &str, inputs: &[Info], attrs: &[(&str, Attribute)]) -> String {
    match run(op, inputs, attrs) {
        Err(NodeError::Msg(m)) | Err(NodeError::Unsupported(m)) => m,
        Ok(i) => panic!("{op}: expected an error, got {i:?}"),
    }
}

fn ints_attr(v: &[i64]) -> Attribute {
    Attribute::Ints(v.to_vec())
}

#[test]
fn broadcasting_follows_numpy() {
    assert_eq!(
        shape("Add", &[f32s(&[2, 1, 4]), f32s(&[3, 1])], &[]),
        [2, 3, 4]
    );
    assert_eq!(shape("Mul", &[f32s(&[]), f32s(&[5])], &[]), [5]);
    assert_eq!(shape("Sub", &[f32s(&[0, 1]), f32s(&[1, 7])], &[]), [0, 7]);
    let e = err("Add", &[f32s(&[2, 3]), f32s(&[4])], &[]);
    assert!(
        e.contains("cannot be broadcast") && e.contains("inputs 0 and 1"),
        "{e}"
    );
    let eq = run("Equal", &[ints(&[1, 2, 3]), scalar(2)], &[]).unwrap();
    assert_eq!(eq.dtype, DType::Bool);
    assert_eq!(eq.data, Some(Data::Ints(vec![0, 1, 0])));
    let w = run("Where", &[eq.clone(), ints(&[7, 8, 9]), scalar(-1)], &[]).unwrap();
    assert_eq!(w.data, Some(Data::Ints(vec![-1, 8, -1])));
    assert_eq!(
        shape("Sum", &[f32s(&[3]), f32s(&[2, 1]), f32s(&[1])], &[]),
        [2, 3]
    );
}

#[test]
fn integer_folding_matches_onnx() {
    let fold = |op: &str, a: i64, b: i64| run(op, &[scalar(a), scalar(b)], &[]).unwrap().data;
    assert_eq!(fold("Div", -7, 2), Some(Data::Ints(vec![-3])));
    assert_eq!(fold("Mod", -7, 3), Some(Data::Ints(vec![2])));
    assert_eq!(fold("Mod", 7, -3), Some(Data::Ints(vec![-2])));
    // Division by zero and overflow are not folded, but the shape is still inferred.
    assert_eq!(fold("Div", 1, 0), None);
    assert_eq!(fold("Mul", i64::MAX, 2), None);
    let cast = run("Cast", &[ints(&[3, 4])], &[("to", Attribute::Int(1))]).unwrap();
    assert_eq!(
        (cast.dtype, cast.data),
        (DType::Float, Some(Data::Floats(vec![3.0, 4.0])))
    );
}

#[test]
fn conv_output_size() {
    let x = f32s(&[1, 3, 224, 224]);
    let w = f32s(&[64, 3, 7, 7]);
    let a = [
        ("strides", ints_attr(&[2, 2])),
        ("pads", ints_attr(&[3, 3, 3, 3])),
    ];
    assert_eq!(
        shape("Conv", &[x.clone(), w.clone()], &a),
        [1, 64, 112, 112]
    );
    let dil = [("dilations", ints_attr(&[2, 2]))];
    assert_eq!(
        shape("Conv", &[x.clone(), w.clone()], &dil),
        [1, 64, 212, 212]
    );
    let same = [
        ("auto_pad", Attribute::String("SAME_UPPER".into())),
        ("strides", ints_attr(&[3, 3])),
    ];
    assert_eq!(
        shape("Conv", &[x.clone(), w.clone()], &same),
        [1, 64, 75, 75]
    );
    let valid = [("auto_pad", Attribute::String("VALID".into()))];
    assert_eq!(
        shape("Conv", &[x.clone(), w.clone()], &valid),
        [1, 64, 218, 218]
    );
    // Depthwise: group = C, weight (C, 1, k, k).
    let dw = [
        ("group", Attribute::Int(32)),
        ("pads", ints_attr(&[1, 1, 1, 1])),
    ];
    assert_eq!(
        shape(
            "Conv",
            &[f32s(&[1, 32, 112, 112]), f32s(&[32, 1, 3, 3])],
            &dw
        ),
        [1, 32, 112, 112]
    );
    let e = err("Conv", &[f32s(&[1, 4, 8, 8]), f32s(&[8, 3, 3, 3])], &[]);
    assert!(e.contains("4 channels"), "{e}");
    let e = err("Conv", &[f32s(&[1, 3, 2, 2]), w], &[]);
    assert!(e.contains("smaller than the dilated kernel"), "{e}");
    assert!(err(
        "Conv",
        &[x, f32s(&[1, 3, 3, 3])],
        &[("strides", ints_attr(&[0, 1]))]
    )
    .contains("positive"));
}

#[test]
fn conv_transpose_output_size() {
    let a = [
        ("strides", ints_attr(&[2, 2])),
        ("pads", ints_attr(&[1, 1, 1, 1])),
        ("output_padding", ints_attr(&[1, 1])),
    ];
    assert_eq!(
        shape(
            "ConvTranspose",
            &[f32s(&[1, 8, 10, 10]), f32s(&[8, 4, 3, 3])],
            &a
        ),
        [1, 4, 20, 20]
    );
}

#[test]
fn pooling() {
    let x = f32s(&[1, 64, 112, 112]);
    let a = [
        ("kernel_shape", ints_attr(&[3, 3])),
        ("strides", ints_attr(&[2, 2])),
        ("pads", ints_attr(&[1, 1, 1, 1])),
    ];
    assert_eq!(
        shape("MaxPool", std::slice::from_ref(&x), &a),
        [1, 64, 56, 56]
    );
    // ceil_mode: squeezenet's 111 -> 55, and the last window must start inside the input.
    let c = [
        ("kernel_shape", ints_attr(&[3, 3])),
        ("strides", ints_attr(&[2, 2])),
        ("ceil_mode", Attribute::Int(1)),
    ];
    assert_eq!(
        shape("MaxPool", &[f32s(&[1, 64, 111, 111])], &c),
        [1, 64, 55, 55]
    );
    assert_eq!(shape("MaxPool", &[f32s(&[1, 1, 6, 6])], &c), [1, 1, 3, 3]);
    let p = [
        ("kernel_shape", ints_attr(&[2])),
        ("strides", ints_attr(&[2])),
        ("pads", ints_attr(&[1, 1])),
        ("ceil_mode", Attribute::Int(1)),
    ];
    assert_eq!(shape("AveragePool", &[f32s(&[1, 1, 4])], &p), [1, 1, 3]);
    assert_eq!(
        shape("GlobalAveragePool", std::slice::from_ref(&x), &[]),
        [1, 64, 1, 1]
    );
    let both = run_n("MaxPool", &[Some(x)], &a, 2).unwrap();
    assert_eq!(both[1].dtype, DType::Int64);
    assert!(err("MaxPool", &[f32s(&[1, 1, 4, 4])], &[]).contains("kernel_shape"));
}

#[test]
fn gemm_and_matmul() {
    let a = f32s(&[1, 512]);
    let b = f32s(&[1000, 512]);
    assert_eq!(
        shape(
            "Gemm",
            &[a.clone(), b.clone()],
            &[("transB", Attribute::Int(1))]
        ),
        [1, 1000]
    );
    assert_eq!(
        shape(
            "Gemm",
            &[f32s(&[512, 1]), f32s(&[512, 10])],
            &[("transA", Attribute::Int(1))]
        ),
        [1, 10]
    );
    assert!(err("Gemm", &[a, b], &[]).contains("inner dims"));
    assert_eq!(
        shape("MatMul", &[f32s(&[2, 1, 3, 4]), f32s(&[5, 4, 6])], &[]),
        [2, 5, 3, 6]
    );
    assert_eq!(shape("MatMul", &[f32s(&[4]), f32s(&[4, 6])], &[]), [6]);
    assert_eq!(
        shape("MatMul", &[f32s(&[2, 3, 4]), f32s(&[4])], &[]),
        [2, 3]
    );
    assert_eq!(
        shape("MatMul", &[f32s(&[4]), f32s(&[4])], &[]),
        Vec::<u64>::new()
    );
    assert!(err("MatMul", &[f32s(&[2, 3]), f32s(&[4, 5])], &[]).contains("inner dims"));
}

#[test]
fn normalization() {
    let x = f32s(&[1, 128, 768]);
    let outs = run_n(
        "LayerNormalization",
        &[Some(x.clone()), Some(f32s(&[768])), Some(f32s(&[768]))],
        &[],
        3,
    )
    .unwrap();
    assert_eq!(outs[0].shape, [1, 128, 768]);
    assert_eq!(outs[1].shape, [1, 128, 1]);
    let stats = f32s(&[8]);
    assert_eq!(
        shape(
            "BatchNormalization",
            &[
                f32s(&[1, 8, 4, 4]),
                stats.clone(),
                stats.clone(),
                stats.clone(),
                stats.clone()
            ],
            &[]
        ),
        [1, 8, 4, 4]
    );
    // Missing statistics and statistics of the wrong size are errors, not guesses.
    let e = err("BatchNormalization", &[f32s(&[1, 8, 4, 4])], &[]);
    assert!(e.contains("input 1 (scale) is missing"), "{e}");
    let e = err(
        "BatchNormalization",
        &[
            f32s(&[1, 8, 4, 4]),
            stats.clone(),
            stats.clone(),
            f32s(&[4]),
            stats,
        ],
        &[],
    );
    assert!(
        e.contains("input 3 'in3' (input_mean)") && e.contains("[8]"),
        "{e}"
    );
}

#[test]
fn slice_indices() {
    // Negative, clamped and stepped indices.
    assert_eq!(slice_axis(10, -3, i64::MAX, 1).unwrap().len, 3);
    assert_eq!(slice_axis(10, 0, 100, 3).unwrap().len, 4);
    assert_eq!(slice_axis(10, -1, i64::MIN, -1).unwrap().len, 10);
    assert_eq!(slice_axis(10, 8, 2, -2).unwrap().len, 3);
    assert_eq!(slice_axis(10, 5, 2, 1).unwrap().len, 0);
    assert_eq!(slice_axis(0, 0, -1, -1).unwrap().len, 0);
    assert!(slice_axis(10, 0, 1, 0).is_err());
    let x = ints(&[10, 20, 30, 40, 50]);
    let s = run(
        "Slice",
        &[x.clone(), ints(&[-1]), ints(&[-6]), ints(&[0]), ints(&[-2])],
        &[],
    )
    .unwrap();
    assert_eq!(s.data, Some(Data::Ints(vec![50, 30, 10])));
    let s = run(
        "Slice",
        &[f32s(&[1, 197, 768]), ints(&[0]), ints(&[1]), ints(&[1])],
        &[],
    )
    .unwrap();
    assert_eq!(s.shape, [1, 1, 768]);
    let e = err("Slice", &[x, f32s(&[1]), ints(&[2])], &[]);
    assert!(
        e.contains("input 1 'in1'") && e.contains("not known at import time"),
        "{e}"
    );
}

#[test]
fn reshape_with_zero_and_minus_one() {
    assert_eq!(
        reshape_shape(&[1, 197, 768], &[0, 0, 12, -1], false).unwrap(),
        [1, 197, 12, 64]
    );
    assert_eq!(reshape_shape(&[2, 3], &[-1], false).unwrap(), [6]);
    assert_eq!(reshape_shape(&[2, 0], &[0, 5], true).unwrap(), [0, 5]);
    assert!(reshape_shape(&[2, 3], &[-1, -1], false).is_err());
    assert!(reshape_shape(&[2, 3], &[4, -1], false).is_err());
    assert!(reshape_shape(&[2, 3], &[7], false).is_err());
    assert!(reshape_shape(&[2], &[0, 0], false).is_err());
    let r = run(
        "Reshape",
        &[f32s(&[1, 768, 14, 14]), ints(&[1, 768, -1])],
        &[],
    )
    .unwrap();
    assert_eq!(r.shape, [1, 768, 196]);
    let e = err("Reshape", &[f32s(&[6]), f32s(&[2])], &[]);
    assert!(e.contains("input 1 'in1' (shape) is not known"), "{e}");
}

#[test]
fn split_concat_gather_transpose() {
    let outs = run_n(
        "Split",
        &[Some(f32s(&[1, 10])), Some(ints(&[3, 7]))],
        &[("axis", Attribute::Int(-1))],
        2,
    )
    .unwrap();
    assert_eq!(
        (outs[0].shape.clone(), outs[1].shape.clone()),
        (vec![1, 3], vec![1, 7])
    );
    let outs = run_n("Split", &[Some(f32s(&[6, 2]))], &[], 3).unwrap();
    assert!(outs.iter().all(|o| o.shape == [2, 2]));
    let outs = run_n(
        "Split",
        &[Some(f32s(&[7]))],
        &[("num_outputs", Attribute::Int(3))],
        3,
    )
    .unwrap();
    assert_eq!(
        outs.iter().map(|o| o.shape[0]).collect::<Vec<_>>(),
        [3, 3, 1]
    );
    assert!(run_n("Split", &[Some(f32s(&[7]))], &[], 3).is_err());
    assert!(run_n("Split", &[Some(f32s(&[7])), Some(ints(&[3, 3]))], &[], 2).is_err());

    let c = run(
        "Concat",
        &[ints(&[1]), ints(&[-1, 768])],
        &[("axis", Attribute::Int(0))],
    )
    .unwrap();
    assert_eq!(
        (c.shape, c.data),
        (vec![3], Some(Data::Ints(vec![1, -1, 768])))
    );
    let c = run(
        "Concat",
        &[f32s(&[1, 1, 768]), f32s(&[1, 196, 768])],
        &[("axis", Attribute::Int(1))],
    )
    .unwrap();
    assert_eq!(c.shape, [1, 197, 768]);
    assert!(err(
        "Concat",
        &[f32s(&[1, 2]), f32s(&[2, 2])],
        &[("axis", Attribute::Int(1))]
    )
    .contains("does not match"));

    let g = run("Gather", &[ints(&[1, 197, 768]), scalar(-1)], &[]).unwrap();
    assert_eq!((g.shape, g.data), (vec![], Some(Data::Ints(vec![768]))));
    assert_eq!(
        shape(
            "Gather",
            &[f32s(&[30522, 768]), Info::new(DType::Int64, vec![1, 128])],
            &[]
        ),
        [1, 128, 768]
    );
    assert!(err("Gather", &[ints(&[1, 2]), scalar(2)], &[]).contains("out of range"));

    assert_eq!(
        shape(
            "Transpose",
            &[f32s(&[1, 2, 3, 4])],
            &[("perm", ints_attr(&[0, 2, 1, 3]))]
        ),
        [1, 3, 2, 4]
    );
    assert_eq!(shape("Transpose", &[f32s(&[1, 2, 3])], &[]), [3, 2, 1]);
    let t = Info::with_data(DType::Int64, vec![2, 2], Some(Data::Ints(vec![1, 2, 3, 4])));
    assert_eq!(
        run("Transpose", &[t], &[]).unwrap().data,
        Some(Data::Ints(vec![1, 3, 2, 4]))
    );
    assert!(err(
        "Transpose",
        &[f32s(&[1, 2])],
        &[("perm", ints_attr(&[0, 0]))]
    )
    .contains("repeated"));
}

#[test]
fn squeeze_unsqueeze_flatten_expand() {
    assert_eq!(
        shape("Squeeze", &[f32s(&[1, 3, 1]), ints(&[0])], &[]),
        [3, 1]
    );
    assert_eq!(shape("Squeeze", &[f32s(&[1, 3, 1])], &[]), [3]);
    assert!(err("Squeeze", &[f32s(&[2, 3]), ints(&[0])], &[]).contains("not 1"));
    let u = run("Unsqueeze", &[scalar(5), ints(&[0])], &[]).unwrap();
    assert_eq!((u.shape, u.data), (vec![1], Some(Data::Ints(vec![5]))));
    assert_eq!(
        shape("Unsqueeze", &[f32s(&[3, 4]), ints(&[-1, 0])], &[]),
        [1, 3, 4, 1]
    );
    assert_eq!(shape("Flatten", &[f32s(&[2, 3, 4])], &[]), [2, 12]);
    assert_eq!(
        shape(
            "Flatten",
            &[f32s(&[2, 3, 4])],
            &[("axis", Attribute::Int(0))]
        ),
        [1, 24]
    );
    assert_eq!(
        shape("Expand", &[f32s(&[1, 1, 768]), ints(&[1, 1, 1])], &[]),
        [1, 1, 768]
    );
    assert_eq!(
        shape("Expand", &[f32s(&[3, 1]), ints(&[2, 1, 6])], &[]),
        [2, 3, 6]
    );
}

#[test]
fn shape_size_constant_of_shape_range_tile() {
    let s = run("Shape", &[f32s(&[1, 197, 768])], &[]).unwrap();
    assert_eq!(
        (s.shape.clone(), s.data),
        (vec![3], Some(Data::Ints(vec![1, 197, 768])))
    );
    let s = run(
        "Shape",
        &[f32s(&[1, 197, 768])],
        &[("start", Attribute::Int(-2))],
    )
    .unwrap();
    assert_eq!(s.data, Some(Data::Ints(vec![197, 768])));
    let n = run("Size", &[f32s(&[2, 3])], &[]).unwrap();
    assert_eq!((n.shape, n.data), (vec![], Some(Data::Ints(vec![6]))));
    let c = run("ConstantOfShape", &[ints(&[2, 3])], &[]).unwrap();
    assert_eq!((c.dtype, c.shape), (DType::Float, vec![2, 3]));
    let r = run("Range", &[scalar(0), scalar(10), scalar(3)], &[]).unwrap();
    assert_eq!(r.data, Some(Data::Ints(vec![0, 3, 6, 9])));
    let r = run("Range", &[scalar(5), scalar(0), scalar(-2)], &[]).unwrap();
    assert_eq!(r.data, Some(Data::Ints(vec![5, 3, 1])));
    assert!(err("Range", &[scalar(0), scalar(1), scalar(0)], &[]).contains("0"));
    assert_eq!(shape("Tile", &[f32s(&[2, 3]), ints(&[2, 1])], &[]), [4, 3]);
}

#[test]
fn pad_resize_reduce() {
    assert_eq!(
        shape(
            "Pad",
            &[f32s(&[1, 3, 4, 4]), ints(&[0, 0, 1, 2, 0, 0, 1, 2])],
            &[]
        ),
        [1, 3, 6, 8]
    );
    assert_eq!(
        shape(
            "Pad",
            &[f32s(&[1, 3, 4, 4]), ints(&[0, 0, -1, 0, 0, 0, -1, 0])],
            &[]
        ),
        [1, 3, 2, 4]
    );
    let scales = Info::with_data(
        DType::Float,
        vec![4],
        Some(Data::Floats(vec![1.0, 1.0, 2.0, 2.0])),
    );
    let none: Option<Info> = None;
    let r = run_n(
        "Resize",
        &[Some(f32s(&[1, 3, 5, 5])), none.clone(), Some(scales)],
        &[],
        1,
    )
    .unwrap();
    assert_eq!(r[0].shape, [1, 3, 10, 10]);
    let r = run_n(
        "Resize",
        &[
            Some(f32s(&[1, 3, 5, 5])),
            none.clone(),
            none,
            Some(ints(&[1, 3, 7, 9])),
        ],
        &[],
        1,
    )
    .unwrap();
    assert_eq!(r[0].shape, [1, 3, 7, 9]);
    assert_eq!(
        shape(
            "ReduceMean",
            &[f32s(&[1, 128, 768])],
            &[("axes", ints_attr(&[-1]))]
        ),
        [1, 128, 1]
    );
    assert_eq!(
        shape(
            "ReduceSum",
            &[f32s(&[2, 3]), ints(&[1])],
            &[("keepdims", Attribute::Int(0))]
        ),
        [2]
    );
    assert_eq!(
        shape(
            "ReduceMax",
            &[f32s(&[2, 3])],
            &[("keepdims", Attribute::Int(0))]
        ),
        Vec::<u64>::new()
    );
    assert_eq!(
        shape("ArgMax", &[f32s(&[2, 3])], &[("axis", Attribute::Int(1))]),
        [2, 1]
    );
}

#[test]
fn unknown_and_data_dependent_ops_are_unsupported() {
    assert!(matches!(
        run("FancyOp", &[f32s(&[1])], &[]),
        Err(NodeError::Unsupported(_))
    ));
    // A known domain's unknown operator, and an unknown domain.
    let names = vec!["x".to_string()];
    let x = f32s(&[1]);
    let ins = [Some(&x)];
    let attrs = BTreeMap::new();
    for (domain, op) in [("com.microsoft", "NotAnOp"), ("org.example", "Relu")] {
        let r = infer_node(&Ctx {
            op,
            domain,
            input_names: &names,
            inputs: &ins,
            attrs: &attrs,
            n_outputs: 1,
            opset: 17,
            max_dim: None,
        });
        assert!(
            matches!(r, Err(NodeError::Unsupported(_))),
            "{domain} {op}: {r:?}"
        );
    }
    let e = err("Relu", &[], &[]);
    assert!(e.contains("input 0 is missing"), "{e}");
}

#[test]
fn einsum_shapes() {
    let eq = [("equation", Attribute::String("bij,bjk->bik".into()))];
    assert_eq!(
        shape("Einsum", &[f32s(&[2, 3, 4]), f32s(&[2, 4, 5])], &eq),
        [2, 3, 5]
    );
    let implicit = [("equation", Attribute::String("ij,jk".into()))];
    assert_eq!(
        shape("Einsum", &[f32s(&[3, 4]), f32s(&[4, 5])], &implicit),
        [3, 5]
    );
}

/// Runs `op` of `domain` (with `max_dim`) on `inputs` under opset 21.
fn run_in(
    domain: &str,
    op: &str,
    inputs: &[Option<Info>],
    attrs: &[(&str, Attribute)],
    n_outputs: usize,
    max_dim: Option<u64>,
) -> Result<Vec<Info>, NodeError> {
    run_full(domain, op, inputs, attrs, n_outputs, max_dim, 21)
}

fn typed(dtype: DType, shape: &[u64]) -> Info {
    Info::new(dtype, shape.to_vec())
}

#[test]
fn every_registered_operator_has_a_rule() {
    // With no inputs every rule fails on its first input (or answers), but none may fall
    // through to "no rule": the registry and the dispatch agree.
    for f in crate::ops::FAMILIES {
        for op in f.ops {
            if *op == "Constant" {
                continue; // the importer's, not inference's
            }
            let r = run_in(f.domain, op, &[], &[], 1, None);
            if let Err(NodeError::Unsupported(why)) = &r {
                panic!("{}:{op} is registered but unsupported: {why}", f.domain);
            }
        }
    }
    assert!(crate::ops::count() > 200);
}

#[test]
fn quantize_dtypes_and_packed_int4() {
    let x = f32s(&[4, 8]);
    let q = |inputs: Vec<Option<Info>>, attrs: &[(&str, Attribute)]| {
        run_in("", "QuantizeLinear", &inputs, attrs, 1, None).map(|mut v| v.remove(0))
    };
    // Default UINT8, zero point's type, output_dtype.
    assert_eq!(
        q(vec![Some(x.clone()), Some(f32s(&[]))], &[])
            .unwrap()
            .dtype,
        DType::Uint8
    );
    let zp = typed(DType::Int8, &[]);
    assert_eq!(
        q(vec![Some(x.clone()), Some(f32s(&[])), Some(zp)], &[])
            .unwrap()
            .dtype,
        DType::Int8
    );
    let out = q(
        vec![Some(x.clone()), Some(f32s(&[4, 2]))],
        &[
            ("axis", Attribute::Int(1)),
            ("block_size", Attribute::Int(4)),
            ("output_dtype", Attribute::Int(22)),
        ],
    )
    .unwrap();
    assert_eq!((out.dtype, out.shape.clone()), (DType::Int4, vec![4, 8]));
    assert_eq!(
        memplan_graph::ir::shape_bytes(out.dtype, &out.shape),
        Some(16)
    );
    // A blocked scale of the wrong shape names the scale input and what it needs.
    let e = q(
        vec![Some(x.clone()), Some(f32s(&[4, 3]))],
        &[
            ("axis", Attribute::Int(1)),
            ("block_size", Attribute::Int(4)),
        ],
    )
    .unwrap_err();
    assert!(
        matches!(&e, NodeError::Msg(m) if m.contains("input 1 'in1' (scale)") && m.contains("[4, 2]")),
        "{e:?}"
    );
    // Per-axis scale of the wrong length.
    let e = q(
        vec![Some(x.clone()), Some(f32s(&[5]))],
        &[("axis", Attribute::Int(0))],
    )
    .unwrap_err();
    assert!(
        matches!(&e, NodeError::Msg(m) if m.contains("per-axis")),
        "{e:?}"
    );
    // output_dtype contradicting the zero point.
    let e = q(
        vec![
            Some(x.clone()),
            Some(f32s(&[])),
            Some(typed(DType::Uint8, &[])),
        ],
        &[("output_dtype", Attribute::Int(3))],
    )
    .unwrap_err();
    assert!(
        matches!(&e, NodeError::Msg(m) if m.contains("must agree")),
        "{e:?}"
    );
    // DequantizeLinear gives the scale's type.
    let d = run_in(
        "",
        "DequantizeLinear",
        &[
            Some(typed(DType::Int4, &[4, 8])),
            Some(typed(DType::Float16, &[])),
        ],
        &[],
        1,
        None,
    )
    .unwrap();
    assert_eq!(d[0].dtype, DType::Float16);
}

#[test]
fn recurrent_layouts_and_directions() {
    let lstm = |x: &[u64], w: &[u64], attrs: &[(&str, Attribute)]| {
        run_in(
            "",
            "LSTM",
            &[Some(f32s(x)), Some(f32s(w)), Some(f32s(&[w[0], w[1], 6]))],
            attrs,
            3,
            None,
        )
    };
    let outs = lstm(
        &[2, 7, 5],
        &[1, 24, 5],
        &[
            ("hidden_size", Attribute::Int(6)),
            ("layout", Attribute::Int(1)),
        ],
    )
    .unwrap();
    assert_eq!(outs[0].shape, [2, 7, 1, 6]);
    assert_eq!(outs[1].shape, [2, 1, 6]);
    assert_eq!(outs[2].shape, [2, 1, 6]);
    let e = lstm(
        &[7, 2, 5],
        &[1, 24, 5],
        &[
            ("hidden_size", Attribute::Int(6)),
            ("direction", Attribute::String("bidirectional".into())),
        ],
    )
    .unwrap_err();
    assert!(
        matches!(&e, NodeError::Msg(m) if m.contains("(W)") && m.contains("[2, 24, 5]")),
        "{e:?}"
    );
}

#[test]
fn data_dependent_sizes_are_bounded() {
    // NonZero of unknown contents: at most every element.
    let nz = run_in("", "NonZero", &[Some(f32s(&[3, 4]))], &[], 1, None).unwrap();
    assert_eq!(nz[0].shape, [2, 12]);
    assert!(nz[0].bound.is_some());
    // Of known contents: exact, with the indices folded.
    let known = Info::with_data(DType::Int64, vec![2, 2], Some(Data::Ints(vec![0, 3, 5, 0])));
    let nz = run_in("", "NonZero", &[Some(known)], &[], 1, None).unwrap();
    assert_eq!(nz[0].shape, [2, 2]);
    assert_eq!(nz[0].data, Some(Data::Ints(vec![0, 1, 1, 0])));
    assert!(nz[0].bound.is_none());
    // Unique: bounded values, exact inverse indices.
    let u = run_in("", "Unique", &[Some(f32s(&[6]))], &[], 4, None).unwrap();
    assert_eq!((u[0].shape.clone(), u[2].shape.clone()), (vec![6], vec![6]));
    assert!(u[0].bound.is_some() && u[2].bound.is_none());
    // Range with a runtime limit needs --max-dim, and uses it.
    let s = Info::with_data(DType::Int64, vec![], Some(Data::Ints(vec![0])));
    let limit = typed(DType::Int64, &[]);
    let ins = [Some(s.clone()), Some(limit), Some(s.clone())];
    let e = run_in("", "Range", &ins, &[], 1, None).unwrap_err();
    assert!(
        matches!(&e, NodeError::Msg(m) if m.contains("input 1 'in1'")),
        "{e:?}"
    );
    let r = run_in("", "Range", &ins, &[], 1, Some(64)).unwrap();
    assert_eq!(r[0].shape, [64]);
    assert!(r[0].bound.is_some());
}

#[test]
fn silent_nonsense_is_an_error() {
    let e = err(
        "MaxPool",
        &[f32s(&[1, 1, 4, 4])],
        &[("kernel_shape", ints_attr(&[0, 2]))],
    );
    assert!(e.contains("kernel dim 0 is 0"), "{e}");
    let nan = Info::with_data(
        DType::Float,
        vec![4],
        Some(Data::Floats(vec![1.0, 1.0, f64::NAN, 1.0])),
    );
    let ins = [Some(f32s(&[1, 1, 4, 4])), None, Some(nan)];
    let e = run_n("Resize", &ins, &[], 1).unwrap_err();
    assert!(
        matches!(&e, NodeError::Msg(m) if m.contains("NaN") && m.contains("input 2")),
        "{e:?}"
    );
    let tiny = Info::with_data(
        DType::Float,
        vec![4],
        Some(Data::Floats(vec![1.0, 1.0, 0.1, 1.0])),
    );
    let ins = [Some(f32s(&[1, 1, 4, 4])), None, Some(tiny)];
    let e = run_n("Resize", &ins, &[], 1).unwrap_err();
    assert!(
        matches!(&e, NodeError::Msg(m) if m.contains("to 0")),
        "{e:?}"
    );
    let f = |v: f64| Info::with_data(DType::Float, vec![], Some(Data::Floats(vec![v])));
    let e = run_n(
        "Range",
        &[Some(f(0.0)), Some(f(f64::NAN)), Some(f(1.0))],
        &[],
        1,
    )
    .unwrap_err();
    assert!(
        matches!(&e, NodeError::Msg(m) if m.contains("finite")),
        "{e:?}"
    );
    let e = run_n("Split", &[Some(f32s(&[4]))], &[], 0).unwrap_err();
    assert!(
        matches!(&e, NodeError::Msg(m) if m.contains("no outputs")),
        "{e:?}"
    );
    let e = err("Softmax", &[f32s(&[2, 3])], &[("axis", Attribute::Int(2))]);
    assert!(e.contains("axis 2 is out of range"), "{e}");
}

#[test]
fn float_shape_arithmetic_folds() {
    let f = |v: &[f64]| {
        Info::with_data(
            DType::Float,
            vec![v.len() as u64],
            Some(Data::Floats(v.to_vec())),
        )
    };
    let r = run("Reciprocal", &[f(&[2.0, 4.0])], &[]).unwrap();
    assert_eq!(r.data, Some(Data::Floats(vec![0.5, 0.25])));
    let r = run(
        "Clip",
        &[
            f(&[-1.0, 5.0]),
            Info::with_data(DType::Float, vec![], Some(Data::Floats(vec![0.0]))),
            Info::with_data(DType::Float, vec![], Some(Data::Floats(vec![4.0]))),
        ],
        &[],
    )
    .unwrap();
    assert_eq!(r.data, Some(Data::Floats(vec![0.0, 4.0])));
    let m = Info::with_data(DType::Int64, vec![2, 2], Some(Data::Ints(vec![1, 5, 3, 2])));
    let r = run(
        "ReduceMax",
        std::slice::from_ref(&m),
        &[("axes", ints_attr(&[1])), ("keepdims", Attribute::Int(0))],
    )
    .unwrap();
    assert_eq!(r.data, Some(Data::Ints(vec![5, 3])));
    let r = run("ReduceProd", &[m], &[("keepdims", Attribute::Int(0))]).unwrap();
    assert_eq!(r.data, Some(Data::Ints(vec![30])));
    let r = run("Max", &[ints(&[1, 7]), ints(&[4, 2]), ints(&[3, 3])], &[]).unwrap();
    assert_eq!(r.data, Some(Data::Ints(vec![4, 7])));
}

#[test]
fn attention_layouts() {
    let mha = |q: &[u64], k: Option<&[u64]>, v: Option<&[u64]>| {
        run_in(
            "com.microsoft",
            "MultiHeadAttention",
            &[Some(f32s(q)), k.map(f32s), v.map(f32s)],
            &[("num_heads", Attribute::Int(4))],
            3,
            None,
        )
        .map(|o| o.iter().map(|i| i.shape.clone()).collect::<Vec<_>>())
    };
    // Packed QKV, packed KV, BNSH key/value.
    assert_eq!(mha(&[2, 5, 4, 3, 8], None, None).unwrap()[0], [2, 5, 32]);
    assert_eq!(
        mha(&[2, 5, 32], Some(&[2, 9, 4, 2, 8]), None).unwrap()[1],
        [2, 4, 9, 8]
    );
    assert_eq!(
        mha(&[2, 5, 32], Some(&[2, 4, 9, 8]), Some(&[2, 4, 9, 16])).unwrap()[0],
        [2, 5, 64]
    );
    assert!(mha(&[2, 5], None, None).is_err());
    // Opset-23 Attention, 4-D.
    let a = run_in(
        "",
        "Attention",
        &[
            Some(f32s(&[1, 8, 3, 16])),
            Some(f32s(&[1, 2, 6, 16])),
            Some(f32s(&[1, 2, 6, 4])),
        ],
        &[],
        4,
        None,
    )
    .unwrap();
    assert_eq!(a[0].shape, [1, 8, 3, 4]);
    assert_eq!(a[3].shape, [1, 8, 3, 6]);
}

#[test]
fn signal_ops() {
    let n = Info::with_data(DType::Int64, vec![], Some(Data::Ints(vec![16])));
    let d = run_in(
        "",
        "DFT",
        &[Some(f32s(&[2, 16, 1])), Some(n.clone())],
        &[("onesided", Attribute::Int(1))],
        1,
        None,
    )
    .unwrap();
    assert_eq!(d[0].shape, [2, 9, 2]);
    let w = run_in("", "HannWindow", &[Some(n)], &[], 1, None).unwrap();
    assert_eq!(w[0].shape, [16]);
    let l = run_in(
        "",
        "SoftmaxCrossEntropyLoss",
        &[Some(f32s(&[4, 10, 3])), Some(typed(DType::Int64, &[4, 3]))],
        &[("reduction", Attribute::String("none".into()))],
        2,
        None,
    )
    .unwrap();
    assert_eq!(
        (l[0].shape.clone(), l[1].shape.clone()),
        (vec![4, 3], vec![4, 10, 3])
    );
}

#[test]
fn qoperator_where_and_dynamic_lstm() {
    let u8s = |s: &[u64]| typed(DType::Uint8, s);
    let sc = || Some(f32s(&[]));
    let w = run_in(
        "com.microsoft",
        "QLinearWhere",
        &[
            Some(typed(DType::Bool, &[2, 1])),
            Some(u8s(&[1, 8])),
            sc(),
            Some(u8s(&[])),
            Some(u8s(&[2, 8])),
            sc(),
            Some(u8s(&[])),
            sc(),
            Some(typed(DType::Int8, &[])),
        ],
        &[],
        1,
        None,
    )
    .unwrap();
    assert_eq!((w[0].dtype, w[0].shape.clone()), (DType::Int8, vec![2, 8]));
    // DynamicQuantizeLSTM: W is (dirs, input, 4 x hidden).
    let l = run_in(
        "com.microsoft",
        "DynamicQuantizeLSTM",
        &[
            Some(f32s(&[7, 2, 5])),
            Some(typed(DType::Int8, &[2, 5, 24])),
            Some(typed(DType::Int8, &[2, 6, 24])),
        ],
        &[
            ("hidden_size", Attribute::Int(6)),
            ("direction", Attribute::String("bidirectional".into())),
        ],
        3,
        None,
    )
    .unwrap();
    assert_eq!(l[0].shape, [7, 2, 2, 6]);
    assert_eq!(l[2].shape, [2, 2, 6]);
}

#[test]
fn per_channel_bias_dequantizes_along_its_axis() {
    let d = run_in(
        "",
        "DequantizeLinear",
        &[Some(typed(DType::Int32, &[8])), Some(f32s(&[8]))],
        &[],
        1,
        None,
    )
    .unwrap();
    assert_eq!((d[0].dtype, d[0].shape.clone()), (DType::Float, vec![8]));
}

#[test]
fn no_registered_operator_panics_on_odd_inputs() {
    // Every registered operator, with 1 to 9 inputs of odd shapes (scalars, zeros, huge
    // dims, mismatched ranks), known and unknown small contents, and odd attributes:
    // an answer or an error, never a panic or an overflow.
    let shapes: [&[u64]; 7] = [
        &[],
        &[0],
        &[3],
        &[2, 0, 4],
        &[1, 3, 8, 8],
        &[u64::MAX / 2, 2, 3],
        &[2, 5, 4, 3, 8],
    ];
    let attrs: [Vec<(&str, Attribute)>; 3] = [
        vec![],
        vec![
            ("axis", Attribute::Int(-7)),
            ("num_heads", Attribute::Int(3)),
            ("kv_num_heads", Attribute::Int(1)),
            ("hidden_size", Attribute::Int(4)),
            ("block_size", Attribute::Int(4)),
            ("K", Attribute::Int(8)),
            ("N", Attribute::Int(u32::MAX as i64)),
        ],
        vec![
            ("kernel_shape", ints_attr(&[3, 3])),
            ("pads", ints_attr(&[-5, 0, 0, 0])),
            ("output_height", Attribute::Int(0)),
            ("channels_last", Attribute::Int(1)),
            ("transA", Attribute::Int(1)),
            ("layout", Attribute::Int(1)),
            ("qkv_hidden_sizes", ints_attr(&[i64::MAX, 1, 1])),
        ],
    ];
    for f in crate::ops::FAMILIES {
        for op in f.ops {
            for n_inputs in 1..=9 {
                for (k, shape) in shapes.iter().enumerate() {
                    let inputs: Vec<Option<Info>> = (0..n_inputs)
                        .map(|i| {
                            let s = shapes[(k + i) % shapes.len()];
                            if i % 3 == 2 {
                                // Small known contents: a scalar or a short list.
                                Some(if s.is_empty() {
                                    scalar(3)
                                } else {
                                    ints(&[2, -1])
                                })
                            } else {
                                Some(f32s(if i == 0 { shape } else { s }))
                            }
                        })
                        .collect();
                    for a in &attrs {
                        for n_out in [1, 3] {
                            let _ = run_in(f.domain, op, &inputs, a, n_out, Some(5));
                        }
                    }
                }
            }
        }
    }
}
