//! The small models of `tests/data/ops/`, written by `scripts/onnx_fixtures.py` (quantized by
//! onnxruntime's quantizer, fused transformer operators, recurrent layers, detection
//! post-processing, shape sub-graphs, local functions, control flow), against the
//! `<name>.ref.json` the script took from onnxruntime runs: every activation tensor's dtype,
//! shape, bytes and file-order lifetime, the same tensor set, the data-dependent tensors
//! marked as planned at an upper bound, and a plan of the whole graph accepted by the
//! checker.

use std::collections::BTreeMap;
use std::path::PathBuf;

use memplan::checker;
use memplan::planner;
use memplan_graph::analysis::{analyse, Options};
use memplan_graph::order::Order;
use memplan_onnx::{import_file, ImportOptions};

fn dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/ops"))
}

type Row = (String, Vec<u64>, u64, u64, u64, bool);

fn reference(name: &str) -> (usize, BTreeMap<String, Row>) {
    let text = std::fs::read_to_string(dir().join(format!("{name}.ref.json"))).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut rows = BTreeMap::new();
    for (k, v) in json["tensors"].as_object().unwrap() {
        let shape = v["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap())
            .collect();
        rows.insert(
            k.clone(),
            (
                v["dtype"].as_str().unwrap().to_string(),
                shape,
                v["bytes"].as_u64().unwrap(),
                v["start"].as_u64().unwrap(),
                v["end"].as_u64().unwrap(),
                v["bounded"].as_bool().unwrap(),
            ),
        );
    }
    (json["nodes"].as_u64().unwrap() as usize, rows)
}

fn check_with(name: &str, options: &ImportOptions) -> memplan_graph::Graph {
    let graph = import_file(&dir().join(format!("{name}.onnx")), options)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let (nodes, want) = reference(name);
    assert_eq!(graph.nodes().len(), nodes, "{name}: node count");
    let analysis = analyse(
        &graph,
        Order::File,
        Options {
            alias: false,
            inplace: false,
        },
    )
    .unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut got: BTreeMap<String, Row> = BTreeMap::new();
    for (i, v) in graph.values().iter().enumerate() {
        if !v.is_activation() {
            continue;
        }
        let id = memplan_graph::ValueId(i as u32);
        let life = analysis.values[i].lifetime;
        got.insert(
            v.name.clone(),
            (
                v.dtype.name().to_string(),
                v.shape.clone().expect("every activation has a shape"),
                v.bytes,
                life.map_or(0, |l| l.start),
                life.map_or(0, |l| l.end),
                graph.bound_reason(id).is_some(),
            ),
        );
    }
    let mut bad = Vec::new();
    for (k, row) in &want {
        match got.get(k) {
            Some(g) if g == row => {}
            Some(g) => bad.push(format!("{k}: got {g:?}, reference {row:?}")),
            None => bad.push(format!("{k}: missing (reference {row:?})")),
        }
    }
    for k in got.keys().filter(|k| !want.contains_key(*k)) {
        bad.push(format!("{k}: not in the reference"));
    }
    assert!(
        bad.is_empty(),
        "{name}: {} of {} tensors differ (dtype, shape, bytes, start, end, bounded):\n{}",
        bad.len(),
        want.len(),
        bad.join("\n")
    );
    assert_plans_validly(&analysis.problem, name);
    graph
}

/// `best-of` plans `problem` and the checker accepts the plan.
fn assert_plans_validly(problem: &memplan::Problem, name: &str) {
    let plan = planner::by_name("best-of").unwrap().plan(problem).unwrap();
    let report = checker::check(problem, &plan);
    assert!(report.is_valid(), "{name}: {:?}", report.violations);
}

fn check(name: &str) -> memplan_graph::Graph {
    check_with(name, &ImportOptions::default())
}

#[test]
fn quant_qdq_static() {
    let g = check("quant_qdq_static");
    assert!(g.nodes().iter().any(|n| n.op_type == "QuantizeLinear"));
}

#[test]
fn quant_qoperator_static() {
    let g = check("quant_qoperator_static");
    assert!(g.nodes().iter().any(|n| n.op_type == "QLinearConv"));
}

#[test]
fn quant_dynamic() {
    check("quant_dynamic");
    check("quant_dynamic_int8");
}

#[test]
fn quant_ops() {
    check("quant_ops");
}

#[test]
fn quant_qoperator_ops() {
    check("quant_qoperator_ops");
}

#[test]
fn fused_transformer() {
    check("fused_transformer");
}

#[test]
fn recurrent() {
    check("recurrent");
}

#[test]
fn standard_ops() {
    check("standard_ops");
}

#[test]
fn detection() {
    let g = check("detection");
    let nms = g.value_by_name("sel").unwrap();
    let why = g.bound_reason(nms).unwrap();
    assert!(why.contains("max_output_boxes_per_class = 4"), "{why}");
}

#[test]
fn shape_subgraphs() {
    check("shape_subgraphs");
}

#[test]
fn functions_are_inlined_with_readable_names() {
    let g = check("functions");
    let names: Vec<&str> = g.nodes().iter().map(|n| n.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "block1/first/conv",
            "block1/first/LeakyRelu_1",
            "block1/second/conv",
            "block1/second/LeakyRelu_1",
            "relu",
            "node_2/conv",
            "node_2/LeakyRelu_1"
        ]
    );
    // ref_attr_name: the caller's alpha (0.3) reaches the nested LeakyRelu; the default
    // (0.2) applies where the caller gives none.
    let alpha = |node: &str| {
        let n = &g.nodes()[g.node_by_name(node).unwrap().index()];
        n.attributes.get("alpha").cloned()
    };
    assert!(
        matches!(alpha("block1/first/LeakyRelu_1"), Some(memplan_graph::Attribute::Float(a)) if (a - 0.3).abs() < 1e-6)
    );
    assert!(
        matches!(alpha("node_2/LeakyRelu_1"), Some(memplan_graph::Attribute::Float(a)) if (a - 0.2).abs() < 1e-6)
    );
}

#[test]
fn control_flow() {
    let g = check("control_flow");
    // The outer values the bodies read are inputs of the If/Loop nodes.
    let node = |name: &str| &g.nodes()[g.node_by_name(name).unwrap().index()];
    let reads = |name: &str| -> Vec<String> {
        node(name)
            .inputs
            .iter()
            .flatten()
            .map(|v| g.value(*v).name.clone())
            .collect()
    };
    assert_eq!(reads("if_runtime"), ["positive", "x", "w", "bias"]);
    assert_eq!(reads("loop"), ["three", "yes", "x", "w"]);
}

#[test]
fn control_flow_bodies_are_steps_around_their_node() {
    // Each If/Loop/Scan node is followed by its body nodes (both branches of the If whose
    // condition is a runtime value, the taken one of the If whose condition is known) and
    // a closing step `<node>/end`; the node writes its outputs and its body's formal inputs.
    let g = check("control_flow");
    let names: Vec<&str> = g.nodes().iter().map(|n| n.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "total",
            "positive",
            "if_runtime",
            "if_runtime/then_branch/then_mm",
            "if_runtime/then_branch/then_add",
            "if_runtime/else_branch/else_mm",
            "if_runtime/else_branch/else_relu",
            "if_runtime/end",
            "if_known",
            "if_known/then_branch/big_cat",
            "if_known/end",
            "loop",
            "loop/body/cond_pass",
            "loop/body/acc_add",
            "loop/body/loop_mm",
            "loop/end",
            "scan",
            "scan/body/scan_add",
            "scan/body/scan_sq",
            "scan/end",
            "after"
        ]
    );
    let node = |name: &str| &g.nodes()[g.node_by_name(name).unwrap().index()];
    let names_of = |ids: &mut dyn Iterator<Item = memplan_graph::ValueId>| -> Vec<String> {
        ids.map(|v| g.value(v).name.clone()).collect()
    };
    assert_eq!(
        names_of(&mut node("loop").outputs.iter().copied()),
        [
            "acc",
            "stacked",
            "loop/body/i",
            "loop/body/cond_in",
            "loop/body/acc_in"
        ]
    );
    assert_eq!(node("loop/end").op_type, "LoopEnd");
    assert!(node("loop/end").outputs.is_empty());
    // The closing step of a Loop reads the body outputs, the formal inputs and the outer
    // values the body reads (every iteration reads them again), and the Loop's outputs.
    assert_eq!(
        names_of(&mut node("loop/end").inputs.iter().flatten().copied()),
        [
            "loop/body/cond_out",
            "loop/body/acc_out",
            "loop/body/scan_out",
            "loop/body/i",
            "loop/body/cond_in",
            "loop/body/acc_in",
            "x",
            "w",
            "acc",
            "stacked"
        ]
    );
    // An If's closing step reads both branches' outputs and the If's output.
    assert_eq!(
        names_of(&mut node("if_runtime/end").inputs.iter().flatten().copied()),
        [
            "if_runtime/then_branch/t_out",
            "if_runtime/else_branch/e_out",
            "branch"
        ]
    );
    // The topological order keeps every window together: it is the file order.
    let topo = memplan_graph::order::execution_order(&g, Order::Topological).unwrap();
    let file: Vec<memplan_graph::NodeId> = (0..g.nodes().len() as u32)
        .map(memplan_graph::NodeId)
        .collect();
    assert_eq!(topo, file);
}

/// Bytes and `[start, end)` of an arena value of `g`.
fn bytes_and_life(
    g: &memplan_graph::Graph,
    a: &memplan_graph::analysis::Analysis,
    name: &str,
) -> (u64, u64, u64) {
    let id = g.value_by_name(name).unwrap_or_else(|| panic!("{name}"));
    let life = a.values[id.index()].lifetime.unwrap();
    (g.value(id).bytes, life.start, life.end)
}

#[test]
fn control_bodies() {
    // An If with temporaries in both branches (steps 3..=10), a Loop (11..=17) and a Scan
    // (18..=22) with body temporaries, an If nested in a Loop (23..=34) whose condition
    // depends on the iteration number. Body values live over their own steps, one
    // iteration's worth; the branches of an If follow each other, so their temporaries can
    // share memory.
    let g = check("control_bodies");
    assert_eq!(g.nodes().len(), 35);
    for order in [Order::File, Order::Topological] {
        for options in [Options::NONE, Options::default()] {
            let a = analyse(&g, order, options).unwrap();
            let life = |name: &str| bytes_and_life(&g, &a, name);
            for (name, want) in [
                ("if_temps/then_branch/t_wide", (256, 4, 6)),
                ("if_temps/then_branch/t_act", (256, 5, 7)),
                ("if_temps/then_branch/t_out", (128, 6, 11)),
                ("if_temps/else_branch/e_tr", (128, 7, 9)),
                ("if_temps/else_branch/e_sq", (128, 8, 10)),
                ("if_temps/else_branch/e_out", (128, 9, 11)),
                // Formal inputs live across the whole iteration (up to the closing step).
                ("loop_temps/body/i", (8, 11, 18)),
                ("loop_temps/body/acc_in", (128, 11, 18)),
                ("loop_temps/body/l_up", (256, 13, 15)),
                ("loop_temps/body/l_act", (256, 14, 16)),
                ("loop_temps/body/acc_out", (128, 15, 18)),
                ("loop_temps/body/l_sum", (4, 16, 18)),
                ("scan_temps/body/s_in", (32, 18, 23)),
                ("scan_temps/body/row", (128, 18, 23)),
                ("scan_temps/body/r_sq", (128, 19, 21)),
                ("scan_temps/body/r_sum", (32, 20, 23)),
                ("nested_loop/body/h_in", (128, 23, 35)),
                ("nested_loop/body/i_mod", (8, 25, 27)),
                ("nested_loop/body/is_odd", (1, 26, 28)),
                ("nested_loop/body/picked", (128, 27, 34)),
                ("nested_loop/body/inner_if/then_branch/n_up", (256, 28, 30)),
                ("nested_loop/body/inner_if/then_branch/n_out", (128, 29, 33)),
                ("nested_loop/body/inner_if/else_branch/m_neg", (128, 30, 32)),
                ("nested_loop/body/inner_if/else_branch/m_out", (128, 31, 33)),
                ("nested_loop/body/h_out", (128, 33, 35)),
                // Outer values a Loop or Scan body reads live to its closing step, its
                // outputs from its first step.
                ("x", (128, 0, 24)),
                ("seq", (768, 0, 23)),
                ("sums", (16, 11, 36)),
                ("row_sums", (192, 18, 36)),
            ] {
                assert_eq!(life(name), want, "{name} ({order:?}, {options:?})");
            }
            if options == Options::NONE {
                // The largest step is the Loop's at step 14: x, seq, branch, acc, sums and
                // the body's i, cond_in, acc_in, cond_out, l_up, l_act. (Every body value
                // over its node's single step would give 2049 at the If.)
                assert_eq!(a.stats.max_live_bytes, 1818);
            }
            let plan = planner::by_name("best-of")
                .unwrap()
                .plan(&a.problem)
                .unwrap();
            let report = checker::check(&a.problem, &plan);
            assert!(report.is_valid(), "{:?}", report.violations);
        }
    }
    let reads = |name: &str| -> Vec<String> {
        g.nodes()[g.node_by_name(name).unwrap().index()]
            .inputs
            .iter()
            .flatten()
            .map(|v| g.value(*v).name.clone())
            .collect()
    };
    // The nested If reads the outer Loop's formal input and the outer weights.
    assert_eq!(
        reads("nested_loop/body/inner_if"),
        [
            "nested_loop/body/is_odd",
            "nested_loop/body/h_in",
            "w_up",
            "w_down"
        ]
    );
    assert_eq!(
        reads("nested_loop"),
        ["two", "yes", "x", "one", "w_up", "w_down"]
    );
    assert_eq!(g.bounded().count(), 0);
}

#[test]
fn body_values_computed_from_a_bound_are_bounded() {
    // control_bodies with `nz = NonZero(x)` first and the If's then branch casting it: the
    // body value is planned at NonZero's upper bound and marked so, naming where it comes
    // from; nz is read by the If (it lives across it).
    use memplan_onnx::proto::{attribute_type, AttributeProto, NodeProto};
    let bytes = std::fs::read(dir().join("control_bodies.onnx")).unwrap();
    let mut m = memplan_onnx::decode_model(&bytes, "cb").unwrap();
    let g = m.graph.as_mut().unwrap();
    let if_node = g.node.iter_mut().find(|n| n.name == "if_temps").unwrap();
    let then_b = if_node
        .attribute
        .iter_mut()
        .find(|a| a.name == "then_branch")
        .unwrap()
        .g
        .as_mut()
        .unwrap();
    then_b.node.push(NodeProto {
        name: "then_cast".into(),
        op_type: "Cast".into(),
        input: vec!["nz".into()],
        output: vec!["t_nz".into()],
        attribute: vec![AttributeProto {
            name: "to".into(),
            r#type: attribute_type::INT,
            i: 1,
            ..Default::default()
        }],
        ..Default::default()
    });
    g.node.insert(
        0,
        NodeProto {
            name: "nz".into(),
            op_type: "NonZero".into(),
            input: vec!["x".into()],
            output: vec!["nz".into()],
            ..Default::default()
        },
    );
    let bytes = prost::Message::encode_to_vec(&m);
    let graph = memplan_onnx::import_bytes(&bytes, "cb", &ImportOptions::default()).unwrap();
    let t = graph.value_by_name("if_temps/then_branch/t_nz").unwrap();
    assert_eq!(graph.value(t).shape.as_deref(), Some(&[2, 32][..]));
    assert_eq!(graph.value(t).bytes, 256);
    let why = graph.bound_reason(t).unwrap();
    assert!(why.contains("'nz'"), "{why}");
    let a = analyse(&graph, Order::File, Options::default()).unwrap();
    // The If is step 4 now, its then branch's nodes 5..=7, the cast 8.
    assert_eq!(
        bytes_and_life(&graph, &a, "if_temps/then_branch/t_nz"),
        (256, 8, 9)
    );
    assert_eq!(bytes_and_life(&graph, &a, "nz"), (512, 1, 9));
    assert_plans_validly(&a.problem, "control_bodies");
}

#[test]
fn body_values_never_take_an_outer_name() {
    // control_flow with its last output renamed `loop/body/acc_out`, the name the Loop's
    // body value would take: the outer value keeps it, the body value is `#1`, and each
    // is read where it should be.
    let bytes = std::fs::read(dir().join("control_flow.onnx")).unwrap();
    let mut m = memplan_onnx::decode_model(&bytes, "cf").unwrap();
    let g = m.graph.as_mut().unwrap();
    let after = g.node.iter_mut().find(|n| n.name == "after").unwrap();
    after.output[0] = "loop/body/acc_out".into();
    g.output
        .iter_mut()
        .find(|o| o.name == "after")
        .unwrap()
        .name = "loop/body/acc_out".into();
    let bytes = prost::Message::encode_to_vec(&m);
    let graph = memplan_onnx::import_bytes(&bytes, "cf", &ImportOptions::default()).unwrap();
    let node = |name: &str| &graph.nodes()[graph.node_by_name(name).unwrap().index()];
    let name_of = |v: memplan_graph::ValueId| graph.value(v).name.clone();
    assert_eq!(name_of(node("after").outputs[0]), "loop/body/acc_out");
    assert_eq!(
        name_of(node("loop/body/acc_add").outputs[0]),
        "loop/body/acc_out#1"
    );
    assert_eq!(
        name_of(node("loop/body/loop_mm").inputs[0].unwrap()),
        "loop/body/acc_out#1"
    );
    let a = analyse(&graph, Order::File, Options::default()).unwrap();
    assert_plans_validly(&a.problem, "control_flow");
}

#[test]
fn topological_order_keeps_control_flow_windows_together() {
    // control_bodies with the reader of the If's output first in the file (not a
    // topological order): the topological order runs it after the If's closing step, and
    // every window (a node, its body steps, its closing step) runs without another node
    // in between, nested windows inside their own.
    let bytes = std::fs::read(dir().join("control_bodies.onnx")).unwrap();
    let mut m = memplan_onnx::decode_model(&bytes, "cb").unwrap();
    let g = m.graph.as_mut().unwrap();
    let after = g.node.pop().unwrap();
    assert_eq!(after.name, "after");
    g.node.insert(0, after);
    let bytes = prost::Message::encode_to_vec(&m);
    let graph = memplan_onnx::import_bytes(&bytes, "cb", &ImportOptions::default()).unwrap();
    assert!(analyse(&graph, Order::File, Options::default()).is_err());
    let order = memplan_graph::order::execution_order(&graph, Order::Topological).unwrap();
    let names: Vec<&str> = order
        .iter()
        .map(|id| graph.node(*id).name.as_str())
        .collect();
    let at = |name: &str| names.iter().position(|n| *n == name).unwrap();
    assert!(at("after") > at("if_temps/end"));
    for (i, end) in names.iter().enumerate() {
        let Some(node) = end.strip_suffix("/end") else {
            continue;
        };
        let start = at(node);
        for inner in &names[start + 1..i] {
            assert!(
                inner.starts_with(&format!("{node}/")),
                "{inner} inside {node}'s window"
            );
        }
    }
    let a = analyse(&graph, Order::Topological, Options::default()).unwrap();
    assert_plans_validly(&a.problem, "control_bodies");
}

#[test]
fn data_dependent_loop_needs_max_dim() {
    // The same Loop with a runtime trip count: an error naming --max-dim, then a bound.
    let bytes = std::fs::read(dir().join("control_flow.onnx")).unwrap();
    let mut m = memplan_onnx::decode_model(&bytes, "cf").unwrap();
    let g = m.graph.as_mut().unwrap();
    let loop_node = g.node.iter_mut().find(|n| n.name == "loop").unwrap();
    loop_node.input[0] = "runtime_m".into();
    let mut cast = g.node[0].clone();
    cast.name = "runtime_m".into();
    cast.op_type = "Cast".into();
    cast.input = vec!["total".into()];
    cast.output = vec!["runtime_m".into()];
    cast.attribute = vec![memplan_onnx::proto::AttributeProto {
        name: "to".into(),
        r#type: memplan_onnx::proto::attribute_type::INT,
        i: 7,
        ..Default::default()
    }];
    g.node.insert(1, cast);
    let bytes = prost::Message::encode_to_vec(&m);
    let e = memplan_onnx::import_bytes(&bytes, "cf", &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("node 'loop' (Loop)") && e.contains("--max-dim"),
        "{e}"
    );
    let options = ImportOptions {
        max_dim: Some(16),
        ..ImportOptions::default()
    };
    let graph = memplan_onnx::import_bytes(&bytes, "cf", &options).unwrap();
    let stacked = graph.value_by_name("stacked").unwrap();
    assert_eq!(graph.value(stacked).shape.as_deref(), Some(&[16, 2, 4][..]));
    assert!(graph
        .bound_reason(stacked)
        .unwrap()
        .contains("--max-dim 16"));
}

#[test]
fn ort_optimized() {
    // A transformer layer as onnxruntime's own graph optimiser saves it (FusedMatMul,
    // SkipLayerNormalization, Gelu, MatMul+Add as Gemm between Reshapes).
    let g = check("ort_optimized");
    for op in ["FusedMatMul", "SkipLayerNormalization", "Gelu"] {
        assert!(
            g.nodes()
                .iter()
                .any(|n| n.op_type == op && n.domain == "com.microsoft"),
            "{op}"
        );
    }
}

#[test]
fn ort_transformers_bert() {
    // The same layer fused by onnxruntime.transformers' BERT optimiser.
    let g = check("ort_transformers_bert");
    for op in ["Attention", "SkipLayerNormalization", "BiasGelu"] {
        assert!(g.nodes().iter().any(|n| n.op_type == op), "{op}");
    }
}

/// A model: x FLOAT [4] → NonZero → Shape → Gather(1) → `op`(n, ten) → Unsqueeze →
/// ConstantOfShape → out.
fn bound_arithmetic(op: &str) -> Vec<u8> {
    use memplan_onnx::proto::*;
    use prost::Message;
    let node = |name: &str, op: &str, i: &[&str], o: &[&str]| NodeProto {
        name: name.into(),
        op_type: op.into(),
        input: i.iter().map(|s| s.to_string()).collect(),
        output: o.iter().map(|s| s.to_string()).collect(),
        ..NodeProto::default()
    };
    let int = |name: &str, dims: Vec<i64>, v: Vec<i64>| TensorProto {
        name: name.into(),
        dims,
        data_type: 7,
        int64_data: v,
        ..TensorProto::default()
    };
    let x = ValueInfoProto {
        name: "x".into(),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor {
                elem_type: 1,
                shape: Some(TensorShapeProto {
                    dim: vec![Dimension {
                        value: Some(DimensionValue::DimValue(4)),
                    }],
                }),
            }),
        }),
    };
    let model = ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(GraphProto {
            name: "g".into(),
            node: vec![
                node("nz", "NonZero", &["x"], &["nz"]),
                node("shape", "Shape", &["nz"], &["s"]),
                node("count", "Gather", &["s", "one"], &["n"]),
                node("arith", op, &["ten", "n"], &["m"]),
                node("unsq", "Unsqueeze", &["m", "zero"], &["m1"]),
                node("fill", "ConstantOfShape", &["m1"], &["out"]),
            ],
            initializer: vec![
                int("one", vec![], vec![1]),
                int("zero", vec![1], vec![0]),
                int("ten", vec![], vec![10]),
            ],
            input: vec![x],
            output: vec![ValueInfoProto {
                name: "out".into(),
                r#type: None,
            }],
        }),
        ..ModelProto::default()
    };
    model.encode_to_vec()
}

#[test]
fn bounds_flow_only_through_monotone_arithmetic() {
    // 10 + count <= 10 + 4: a bound, planned as 14.
    let g = memplan_onnx::import_bytes(&bound_arithmetic("Add"), "add", &ImportOptions::default())
        .unwrap();
    let out = g.value_by_name("out").unwrap();
    assert_eq!(g.value(out).shape.as_deref(), Some(&[14][..]));
    assert!(g.bound_reason(out).is_some());
    // 10 - count is not bounded by 10 - 4: its value is unknown, so the fill fails (or,
    // with --max-dim, is planned at that bound) instead of being planned at 6.
    let e = memplan_onnx::import_bytes(&bound_arithmetic("Sub"), "sub", &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("node 'fill' (ConstantOfShape)") && e.contains("input 0 'm1'"),
        "{e}"
    );
    let options = ImportOptions {
        max_dim: Some(10),
        ..ImportOptions::default()
    };
    let g = memplan_onnx::import_bytes(&bound_arithmetic("Sub"), "sub", &options).unwrap();
    let out = g.value_by_name("out").unwrap();
    assert_eq!(g.value(out).shape.as_deref(), Some(&[10][..]));
}

#[test]
fn quant_dynamic_ops() {
    let g = check("quant_dynamic_ops");
    for op in ["QAttention", "QEmbedLayerNormalization"] {
        assert!(g.nodes().iter().any(|n| n.op_type == op), "{op}");
    }
}

#[test]
fn recursive_functions_are_refused() {
    use memplan_onnx::proto::*;
    use prost::Message;
    let bytes = std::fs::read(dir().join("functions.onnx")).unwrap();
    let mut m = memplan_onnx::decode_model(&bytes, "f").unwrap();
    // ConvAct's LeakyRelu now calls Block, which calls ConvAct.
    let conv_act = m
        .functions
        .iter_mut()
        .find(|f| f.name == "ConvAct")
        .unwrap();
    let act = conv_act.node.last_mut().unwrap();
    act.op_type = "Block".into();
    act.domain = "local".into();
    act.input = vec!["c".into(), "W".into(), "W".into()];
    let bytes = ModelProto::encode_to_vec(&m);
    let e = memplan_onnx::import_bytes(&bytes, "f.onnx", &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("inlining local functions")
            && e.contains("recursively")
            && e.contains("Block -> ConvAct -> Block"),
        "{e}"
    );
}

#[test]
fn inlined_nodes_use_their_function_opset() {
    use memplan_onnx::proto::*;
    use prost::Message;
    let bytes = std::fs::read(dir().join("functions.onnx")).unwrap();
    let mut m = memplan_onnx::decode_model(&bytes, "f").unwrap();
    // ConvAct written for opset 10: its activation becomes Resize-10 (scales in slot 1),
    // which opset 17 would read from slot 2.
    let conv_act = m
        .functions
        .iter_mut()
        .find(|f| f.name == "ConvAct")
        .unwrap();
    for o in &mut conv_act.opset_import {
        if o.domain.is_empty() {
            o.version = 10;
        }
    }
    let scales = TensorProto {
        name: "s".into(),
        dims: vec![4],
        data_type: 1,
        float_data: vec![1.0, 1.0, 2.0, 2.0],
        ..TensorProto::default()
    };
    let constant = NodeProto {
        name: "scales".into(),
        op_type: "Constant".into(),
        output: vec!["s".into()],
        attribute: vec![AttributeProto {
            name: "value".into(),
            r#type: 4,
            t: Some(scales),
            ..AttributeProto::default()
        }],
        ..NodeProto::default()
    };
    let act = conv_act.node.last_mut().unwrap();
    act.op_type = "Resize".into();
    act.input = vec!["c".into(), "s".into()];
    act.attribute.clear();
    conv_act.node.insert(1, constant);
    let bytes = ModelProto::encode_to_vec(&m);
    let g = memplan_onnx::import_bytes(&bytes, "f.onnx", &ImportOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    // block1: 12x12, conv pads 1 → 12, resized 24; conv pads 0 → 22, resized 44.
    let b = g.value_by_name("b").unwrap();
    assert_eq!(g.value(b).shape.as_deref(), Some(&[1, 4, 44, 44][..]));
}
