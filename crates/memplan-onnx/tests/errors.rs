//! Imports of small hand-built models: what succeeds, and the message of each failure.

mod common;

use common::*;
use memplan_graph::{TensorData, ValueKind};
use memplan_onnx::{
    import_bytes, parse_dim, parse_input_shape, proto::ModelProto, ImportOptions, OnnxError,
};

fn import(model: &ModelProto) -> Result<memplan_graph::Graph, OnnxError> {
    import_bytes(&encode(model), "t.onnx", &ImportOptions::default())
}

fn error(model: &ModelProto) -> String {
    match import(model) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn small_model_imports_with_external_weight_and_folded_shape() {
    let g = import(&small_model()).unwrap();
    let v = |name: &str| g.value(g.value_by_name(name).unwrap());
    assert_eq!(v("x").kind, ValueKind::Input);
    assert_eq!(v("w").kind, ValueKind::Weight);
    assert_eq!(v("w").shape, Some(vec![4, 3, 3, 3]));
    assert_eq!(v("w").data, None, "external weights are shapes only");
    assert_eq!(v("minus_one").data, Some(TensorData::Ints(vec![-1])));
    assert_eq!(v("zero").kind, ValueKind::Constant);
    assert_eq!(v("zero").producer, None);
    assert_eq!(v("c").shape, Some(vec![1, 4, 8, 8]));
    assert_eq!(v("target").kind, ValueKind::Activation);
    assert_eq!(v("target").data, Some(TensorData::Ints(vec![1, -1])));
    assert_eq!(v("y").shape, Some(vec![1, 256]));
    assert_eq!(v("y").bytes, 1024);
    // Every node is kept in file order, Constant nodes included (without outputs).
    let ops: Vec<&str> = g.nodes().iter().map(|n| n.op_type.as_str()).collect();
    assert_eq!(
        ops,
        [
            "Conv",
            "Relu",
            "Shape",
            "Constant",
            "Gather",
            "Constant",
            "Unsqueeze",
            "Concat",
            "Reshape"
        ]
    );
    assert!(g.nodes()[3].outputs.is_empty());
    assert_eq!(g.outputs(), [g.value_by_name("y").unwrap()]);
    assert_eq!(g.inputs(), [g.value_by_name("x").unwrap()]);
}

#[test]
fn truncated_file_is_a_decode_error() {
    let bytes = encode(&small_model());
    let mut failures = 0;
    for cut in 1..bytes.len() {
        if let Err(e) = import_bytes(&bytes[..cut], "t.onnx", &ImportOptions::default()) {
            assert!(!e.to_string().is_empty());
            failures += 1;
        }
    }
    assert!(failures > bytes.len() / 2, "most truncations must fail");
    let e = import_bytes(
        &bytes[..bytes.len() / 2],
        "t.onnx",
        &ImportOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("t.onnx:"), "{e}");
    assert!(e.contains("truncated") || e.contains("not"), "{e}");
}

#[test]
fn random_bytes_are_rejected() {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for len in [1usize, 7, 64, 1000] {
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
            .collect();
        let e = import_bytes(&bytes, "noise.onnx", &ImportOptions::default());
        assert!(e.is_err(), "random bytes of length {len} imported");
    }
    let e = import_bytes(b"hello, world", "text.onnx", &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("text.onnx") && e.contains("not a valid ONNX model"),
        "{e}"
    );
    let e = import_bytes(&[], "empty.onnx", &ImportOptions::default()).unwrap_err();
    assert!(matches!(e, OnnxError::NoGraph { .. }), "{e}");
}

#[test]
fn dangling_input_names_node_and_value() {
    let mut m = small_model();
    m.graph.as_mut().unwrap().node[1].input[0] = "nowhere".into();
    let e = error(&m);
    assert!(
        e.contains("'relu'") && e.contains("Relu") && e.contains("'nowhere'"),
        "{e}"
    );
    let mut m = small_model();
    m.graph.as_mut().unwrap().output[0].name = "ghost".into();
    assert!(error(&m).contains("graph output 'ghost'"));
}

#[test]
fn unknown_operator_names_op_and_node() {
    let mut m = small_model();
    m.graph.as_mut().unwrap().node[1].op_type = "FrobnicateV2".into();
    let e = error(&m);
    assert!(e.contains("'FrobnicateV2'") && e.contains("'relu'"), "{e}");
    let mut m = small_model();
    m.graph.as_mut().unwrap().node[1].domain = "com.example".into();
    let e = error(&m);
    assert!(e.contains("com.example") && e.contains("'relu'"), "{e}");
}

#[test]
fn cycle_is_reported_with_its_nodes() {
    // relu reads y (the reshape's output), which depends on relu: a cycle.
    let mut m = small_model();
    m.graph.as_mut().unwrap().node[1].input[0] = "y".into();
    let e = error(&m);
    assert!(
        e.contains("cycle") && e.contains("'relu'") && e.contains("'reshape'"),
        "{e}"
    );
    // A node reading its own output.
    let mut m = small_model();
    m.graph.as_mut().unwrap().node[1].input[0] = "r".into();
    let e = error(&m);
    assert!(e.contains("'relu' -> 'relu'"), "{e}");
}

#[test]
fn out_of_order_nodes_import_in_file_order() {
    // Shape inference follows dependencies; the graph keeps the file's order so that the
    // execution-order analysis can report the node that runs too early.
    let mut m = small_model();
    m.graph.as_mut().unwrap().node.swap(0, 1);
    let g = import(&m).unwrap();
    assert_eq!(g.nodes()[0].op_type, "Relu");
}

#[test]
fn symbolic_dim_needs_an_override() {
    let mut m = small_model();
    m.graph.as_mut().unwrap().input[0] =
        tensor_value("x", 1, vec![param("batch"), dim(3), dim(8), dim(8)]);
    let e = error(&m);
    assert!(
        e.contains("'x'")
            && e.contains("dim 0")
            && e.contains("batch")
            && e.contains("--input-shape")
            && e.contains("--dim batch="),
        "{e}"
    );
    let mut options = ImportOptions::default();
    options.dims.insert("batch".into(), 2);
    let g = import_bytes(&encode(&m), "t.onnx", &options).unwrap();
    assert_eq!(
        g.value(g.value_by_name("y").unwrap()).shape,
        Some(vec![2, 256])
    );
    let mut options = ImportOptions::default();
    options.input_shapes.insert("x".into(), vec![3, 3, 4, 4]);
    let g = import_bytes(&encode(&m), "t.onnx", &options).unwrap();
    assert_eq!(
        g.value(g.value_by_name("y").unwrap()).shape,
        Some(vec![3, 64])
    );
    // An unnamed unknown dim.
    m.graph.as_mut().unwrap().input[0] =
        tensor_value("x", 1, vec![memplan_onnx::proto::Dimension { value: None }]);
    let e = error(&m);
    assert!(e.contains("dim 0") && e.contains("--input-shape x="), "{e}");
    // Overrides naming nothing are errors, not silently ignored.
    let mut options = ImportOptions::default();
    options.input_shapes.insert("nope".into(), vec![1]);
    let e = import_bytes(&encode(&small_model()), "t.onnx", &options)
        .unwrap_err()
        .to_string();
    assert!(e.contains("'nope'") && e.contains("inputs: x"), "{e}");
    let mut options = ImportOptions::default();
    options.dims.insert("seq".into(), 1);
    let e = import_bytes(&encode(&small_model()), "t.onnx", &options)
        .unwrap_err()
        .to_string();
    assert!(e.contains("the inputs have no named dims"), "{e}");
    // A misspelt named dim: the names the model has, and the likely one.
    let mut m = small_model();
    m.graph.as_mut().unwrap().input[0] =
        tensor_value("x", 1, vec![param("batch"), dim(3), dim(8), dim(8)]);
    let mut options = ImportOptions::default();
    options.dims.insert("bacth".into(), 2);
    let e = import_bytes(&encode(&m), "t.onnx", &options)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("named dims: batch") && e.contains("did you mean 'batch'?"),
        "{e}"
    );
}

#[test]
fn shape_errors_name_node_op_and_input() {
    // The reshape target can no longer be folded when it comes from a graph input.
    let mut m = small_model();
    let g = m.graph.as_mut().unwrap();
    g.input.push(tensor_value("dyn", 7, vec![dim(2)]));
    g.node[8].input[1] = "dyn".into();
    let e = error(&m);
    assert!(
        e.contains("'reshape' (Reshape)")
            && e.contains("input 1 'dyn'")
            && e.contains("not known at import time"),
        "{e}"
    );
    // A conv whose channels do not match its weight.
    let mut m = small_model();
    m.graph.as_mut().unwrap().input[0] = tensor_value("x", 1, vec![dim(1), dim(5), dim(8), dim(8)]);
    let e = error(&m);
    assert!(
        e.contains("'conv' (Conv)") && e.contains("5 channels"),
        "{e}"
    );
}

#[test]
fn malformed_values_are_errors() {
    let mut m = small_model();
    m.graph.as_mut().unwrap().initializer[0].dims[0] = -4;
    assert!(error(&m).contains("negative"));
    let mut m = small_model();
    m.graph.as_mut().unwrap().initializer[1].raw_data = vec![1, 2, 3].into();
    assert!(error(&m).contains("raw_data has 3 bytes"));
    let mut m = small_model();
    m.graph.as_mut().unwrap().initializer[0].data_type = 99;
    assert!(error(&m).contains("not a known"));
    let mut m = small_model();
    m.graph.as_mut().unwrap().node[2].output[0] = "c".into();
    let e = error(&m);
    assert!(
        e.contains("'shape'") && e.contains("already produced by node 'conv'"),
        "{e}"
    );
    let mut m = small_model();
    m.graph.as_mut().unwrap().input[0].r#type = None;
    assert!(error(&m).contains("not a tensor"));
    let mut m = small_model();
    m.graph.as_mut().unwrap().input[0] =
        tensor_value("x", 1, vec![dim(1 << 40), dim(1 << 40), dim(8), dim(8)]);
    assert!(error(&m).contains("overflows"));
}

/// A tensor attribute or initialiser whose inline contents disagree with its dims is an
/// error naming it, whatever its size (above the folding limit too) and element type.
#[test]
fn tensor_contents_that_disagree_with_dims_are_errors() {
    fn constant(m: &mut ModelProto) -> &mut memplan_onnx::proto::TensorProto {
        let g = m.graph.as_mut().unwrap();
        let node = g.node.iter_mut().find(|n| n.name == "zero_const").unwrap();
        node.attribute[0].t.as_mut().unwrap()
    }
    // Typed data: a scalar's dims with two int64 entries.
    let mut m = small_model();
    constant(&mut m).int64_data = vec![0, 1];
    let e = error(&m);
    assert!(
        e.contains("zero_const.value")
            && e.contains("int64_data has 2 entries but dims [] give 1 elements"),
        "{e}"
    );
    // Raw data of a large float tensor (no contents are folded at this size).
    let mut m = small_model();
    let t = constant(&mut m);
    t.int64_data.clear();
    t.data_type = 1;
    t.dims = vec![1000, 1000];
    t.raw_data = vec![0; 4 * 1000 * 1000 - 4].into();
    let e = error(&m);
    assert!(
        e.contains("raw_data has 3999996 bytes but dims [1000, 1000] of") && e.contains("4000000"),
        "{e}"
    );
    // FLOAT16 contents are never folded, but their length is still checked.
    let mut m = small_model();
    let t = constant(&mut m);
    t.int64_data.clear();
    t.data_type = 10;
    t.dims = vec![3];
    t.int32_data = vec![0; 4];
    let e = error(&m);
    assert!(e.contains("int32_data has 4 entries but dims [3]"), "{e}");
    // The same contents with matching dims import; stripped tensors (no contents) too.
    let mut m = small_model();
    let mut spare = node("spare_const", "Constant", &[], &["spare"]);
    spare.attribute.push(memplan_onnx::proto::AttributeProto {
        name: "value".into(),
        r#type: 4,
        t: Some(memplan_onnx::proto::TensorProto {
            dims: vec![4],
            data_type: 10,
            int32_data: vec![0; 4],
            ..Default::default()
        }),
        ..Default::default()
    });
    m.graph.as_mut().unwrap().node.push(spare);
    let g = import(&m).unwrap();
    assert_eq!(g.value(g.value_by_name("spare").unwrap()).bytes, 8);
    let mut m = small_model();
    m.graph.as_mut().unwrap().initializer[1].int64_data = vec![1, 2, 3];
    let e = error(&m);
    assert!(
        e.contains("minus_one") && e.contains("both raw_data and typed data"),
        "{e}"
    );
}

#[test]
fn duplicate_and_empty_node_names_are_made_unique() {
    let mut m = small_model();
    let g = m.graph.as_mut().unwrap();
    g.node[1].name = "conv".into();
    g.node[2].name = String::new();
    let g = import(&m).unwrap();
    let names: Vec<&str> = g.nodes().iter().map(|n| n.name.as_str()).collect();
    assert_eq!(&names[..3], ["conv", "conv#1", "node_2"]);
}

#[test]
fn override_arguments_parse() {
    assert_eq!(
        parse_input_shape("input=1x3x224x224").unwrap(),
        ("input".to_string(), vec![1, 3, 224, 224])
    );
    assert_eq!(
        parse_input_shape("a=b=2").unwrap(),
        ("a=b".to_string(), vec![2])
    );
    assert_eq!(parse_input_shape("s=").unwrap(), ("s".to_string(), vec![]));
    assert!(parse_input_shape("input").is_err());
    assert!(parse_input_shape("=1x2").is_err());
    assert!(parse_input_shape("x=1x-3").unwrap_err().contains("'-3'"));
    assert!(parse_input_shape("x=1xx3").is_err());
    assert_eq!(parse_dim("batch=8").unwrap(), ("batch".to_string(), 8));
    assert!(parse_dim("batch").is_err());
    assert!(parse_dim("batch=-1").is_err());
    assert!(parse_dim("=1").is_err());
}

#[test]
fn long_lists_and_large_constants_stay_cheap() {
    // A 100k-element Constant passed through 200 Identity nodes, and an Unsqueeze with 100k
    // axes: linear work, and contents above the folding limit are not carried along.
    let mut m = small_model();
    let g = m.graph.as_mut().unwrap();
    let mut big = node("big", "Constant", &[], &["big0"]);
    big.attribute
        .push(ints_attr("value_ints", &vec![7; 100_000]));
    g.node.push(big);
    for i in 0..200 {
        g.node.push(node(
            &format!("id{i}"),
            "Identity",
            &[&format!("big{i}")],
            &[&format!("big{}", i + 1)],
        ));
    }
    // The attribute form of the axes (opset < 13) is read whatever its length.
    let mut unsq = node("wide", "Unsqueeze", &["zero"], &["wide"]);
    unsq.attribute
        .push(ints_attr("axes", &(0..100_000).collect::<Vec<i64>>()));
    g.node.push(unsq);
    let start = std::time::Instant::now();
    let graph = import(&m).unwrap();
    assert!(start.elapsed().as_secs() < 5, "took {:?}", start.elapsed());
    let last = graph.value(graph.value_by_name("big200").unwrap());
    assert_eq!(last.shape, Some(vec![100_000]));
    assert_eq!(last.data, None);
    let wide = graph.value(graph.value_by_name("wide").unwrap());
    assert_eq!(wide.shape.as_ref().map(Vec::len), Some(100_000));
    // A shape operand too large to keep is reported as such.
    let g = m.graph.as_mut().unwrap();
    g.node
        .push(node("r2", "Reshape", &["big200", "big200"], &["r2"]));
    let e = error(&m);
    assert!(
        e.contains("'r2' (Reshape)") && e.contains("100000 elements"),
        "{e}"
    );
}

#[test]
fn graph_input_that_is_an_initialiser_must_agree_with_it() {
    // Old opsets list initialisers among the inputs: the same type and shape is fine...
    let mut m = small_model();
    let g = m.graph.as_mut().unwrap();
    g.input
        .push(tensor_value("w", 1, vec![dim(4), dim(3), dim(3), dim(3)]));
    let graph = import(&m).unwrap();
    let w = graph.value(graph.value_by_name("w").unwrap());
    assert_eq!(w.kind, ValueKind::Weight);
    // ...another shape or type is an error naming the value and both declarations.
    let mut m = small_model();
    m.graph
        .as_mut()
        .unwrap()
        .input
        .push(tensor_value("w", 1, vec![dim(4), dim(3)]));
    let e = error(&m);
    assert!(
        e.contains("value 'w'")
            && e.contains("graph input declared as FLOAT [4, 3]")
            && e.contains("initialiser of FLOAT [4, 3, 3, 3]"),
        "{e}"
    );
    let mut m = small_model();
    m.graph.as_mut().unwrap().input.push(tensor_value(
        "w",
        7,
        vec![dim(4), dim(3), dim(3), dim(3)],
    ));
    assert!(error(&m).contains("declared as INT64"));
}
