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

/// Runs `op` on `inputs` (None = omitted) with `attrs`, expecting `n_outputs` outputs.
fn run_n(
    op: &str,
    inputs: &[Option<Info>],
    attrs: &[(&str, Attribute)],
    n_outputs: usize,
) -> Result<Vec<Info>, NodeError> {
    let names: Vec<String> = (0..inputs.len()).map(|i| format!("in{i}")).collect();
    let refs: Vec<Option<&Info>> = inputs.iter().map(Option::as_ref).collect();
    let attrs: BTreeMap<String, Attribute> = attrs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    infer_node(&Ctx {
        op,
        input_names: &names,
        inputs: &refs,
        attrs: &attrs,
        n_outputs,
        opset: 17,
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
    assert_eq!(
        shape("BatchNormalization", &[f32s(&[1, 8, 4, 4])], &[]),
        [1, 8, 4, 4]
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
    assert!(matches!(
        run("NonZero", &[f32s(&[3])], &[]),
        Err(NodeError::Unsupported(_))
    ));
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
