//! The hand-written graphs in `tests/data`: lifetimes, alias groups, in-place partners and
//! order errors, each checked value by value.

use std::path::Path;

use memplan::Lifetime;
use memplan_graph::{
    analyse, read_graph_json, write_graph_json, Analysis, Graph, Options, Order, OrderError, Role,
};

fn load(name: &str) -> Graph {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    read_graph_json(&text, name).unwrap()
}

/// `(name, [start, end), alias root, in-place partner)` of every arena value, report order.
fn rows(g: &Graph, a: &Analysis) -> Vec<(String, (u64, u64), String, String)> {
    let name =
        |id: Option<memplan_graph::ValueId>| id.map_or(String::new(), |i| g.value(i).name.clone());
    a.report_order
        .iter()
        .filter(|&&id| a.values[id.index()].lifetime.is_some())
        .map(|&id| {
            let info = &a.values[id.index()];
            let l = info.lifetime.unwrap();
            (
                g.value(id).name.clone(),
                (l.start, l.end),
                name(info.group_root),
                name(info.inplace_of),
            )
        })
        .collect()
}

fn row(
    name: &str,
    start: u64,
    end: u64,
    root: &str,
    partner: &str,
) -> (String, (u64, u64), String, String) {
    (name.into(), (start, end), root.into(), partner.into())
}

#[test]
fn small_cnn_without_sharing_matches_the_step_rules() {
    let g = load("small_cnn.json");
    let a = analyse(&g, Order::File, Options::NONE).unwrap();
    assert_eq!(
        rows(&g, &a),
        vec![
            row("x", 0, 2, "", ""),
            row("conv1_out", 1, 3, "", ""),
            row("relu1_out", 2, 6, "", ""),
            row("conv2_out", 3, 5, "", ""),
            row("relu2_out", 4, 6, "", ""),
            row("add_out", 5, 7, "", ""),
            row("flat", 6, 8, "", ""),
            row("logits", 7, 8, "", ""),
        ]
    );
    assert_eq!(a.problem.len(), 8);
    let s = &a.stats;
    assert_eq!((s.arena_values, s.activation_values), (8, 6));
    assert_eq!(s.arena_bytes, 12288 + 5 * 32768 + 32768 + 40);
    assert_eq!(s.activation_bytes, 6 * 32768);
    // Step 5: relu1_out, relu2_out, add_out.
    assert_eq!(s.max_live_bytes, 3 * 32768);
    assert_eq!(s.max_live_unshared_bytes, s.max_live_bytes);
    assert_eq!(
        s.largest.map(|(id, _)| g.value(id).name.as_str()),
        Some("conv1_out")
    );
    assert_eq!((s.alias_saved_bytes, s.inplace_saved_bytes), (0, 0));
    assert_eq!(s.weight_bytes, (8 * 27 + 8 * 72 + 10 * 8192) * 4 + 16);
    let roles: Vec<Role> = ["x", "conv1.w", "flat_shape", "logits", "flat"]
        .iter()
        .map(|n| a.values[g.value_by_name(n).unwrap().index()].role)
        .collect();
    assert_eq!(
        roles,
        [
            Role::Input,
            Role::Weight,
            Role::Constant,
            Role::Output,
            Role::Activation
        ]
    );
}

#[test]
fn small_cnn_with_sharing_uses_three_buffers() {
    let g = load("small_cnn.json");
    let a = analyse(&g, Order::File, Options::default()).unwrap();
    assert_eq!(
        rows(&g, &a),
        vec![
            row("x", 0, 2, "", ""),
            row("conv1_out", 1, 3, "conv1_out", ""),
            row("relu1_out", 2, 6, "conv1_out", "conv1_out"),
            row("conv2_out", 3, 5, "conv2_out", ""),
            row("relu2_out", 4, 6, "conv2_out", "conv2_out"),
            row("add_out", 5, 7, "conv2_out", "relu2_out"),
            row("flat", 6, 8, "conv2_out", ""),
            row("logits", 7, 8, "", ""),
        ]
    );
    let buffers: Vec<(&str, Lifetime)> = a
        .problem
        .buffers()
        .iter()
        .map(|b| (b.name.as_str(), b.lifetime))
        .collect();
    assert_eq!(
        buffers,
        [
            ("x", Lifetime { start: 0, end: 2 }),
            ("conv1_out", Lifetime { start: 1, end: 6 }),
            ("conv2_out", Lifetime { start: 3, end: 8 }),
            ("logits", Lifetime { start: 7, end: 8 }),
        ]
    );
    assert_eq!(a.stats.alias_saved_bytes, 32768);
    assert_eq!(a.stats.inplace_saved_bytes, 3 * 32768);
    assert_eq!(a.stats.max_live_bytes, 2 * 32768);
    assert_eq!(a.stats.max_live_unshared_bytes, 3 * 32768);
    let flat = g.value_by_name("flat").unwrap();
    assert!(a.values[flat.index()].is_view);
}

#[test]
fn views_share_with_graph_inputs_and_outputs_but_never_overwrite_them() {
    let g = load("views.json");
    let a = analyse(&g, Order::File, Options::default()).unwrap();
    assert_eq!(
        rows(&g, &a),
        vec![
            row("x", 0, 2, "x", ""),
            row("v", 1, 3, "x", ""),
            // Relu may not write over v: its group holds the graph input x.
            row("r", 2, 4, "r", ""),
            row("f", 3, 5, "r", ""),
            row("y", 4, 5, "r", ""),
        ]
    );
    assert_eq!(a.problem.len(), 2);
    assert_eq!(
        a.problem.buffers()[0].lifetime,
        Lifetime { start: 0, end: 3 }
    );
    assert_eq!(
        a.problem.buffers()[1].lifetime,
        Lifetime { start: 2, end: 5 }
    );
    assert_eq!(a.stats.alias_saved_bytes, 3 * 64);
    let no_alias = analyse(
        &g,
        Order::File,
        Options {
            alias: false,
            inplace: true,
        },
    )
    .unwrap();
    // Without views, r = Relu(v) may be written over v (v dies at relu, not an input).
    let r = g.value_by_name("r").unwrap();
    assert_eq!(no_alias.values[r.index()].inplace_of, g.value_by_name("v"));
}

#[test]
fn inplace_is_taken_exactly_where_the_input_dies() {
    let g = load("inplace.json");
    let a = analyse(&g, Order::File, Options::default()).unwrap();
    let partner = |name: &str| {
        let id = g.value_by_name(name).unwrap();
        a.values[id.index()]
            .inplace_of
            .map(|p| g.value(p).name.clone())
    };
    // a: its input is the graph input. c: b is read again by `add`. m: not elementwise.
    // y: a graph output (and m is broadcast).
    let expected = [
        ("a", None),
        ("b", Some("a")),
        ("c", None),
        ("d", Some("c")),
        ("e", Some("d")),
        ("m", None),
        ("y", None),
    ];
    for (name, want) in expected {
        assert_eq!(partner(name).as_deref(), want, "in-place partner of {name}");
    }
    let off = analyse(
        &g,
        Order::File,
        Options {
            alias: true,
            inplace: false,
        },
    )
    .unwrap();
    assert!(off.values.iter().all(|v| v.inplace_of.is_none()));
    assert!(a.stats.max_live_bytes <= off.stats.max_live_bytes);
}

#[test]
fn order_errors_name_the_nodes() {
    let err = analyse(&load("cycle.json"), Order::File, Options::default()).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("'first'")
            && text.contains("'second'")
            && text.contains("'third'")
            && text.contains("cycle"),
        "{text}"
    );

    let g = load("read_before_produce.json");
    let err = analyse(&g, Order::File, Options::default()).unwrap_err();
    assert!(
        matches!(
            err,
            memplan_graph::AnalysisError::Order(OrderError::ReadBeforeProduced { ref node, ref producer, ref value, .. })
                if node == "late_reader" && producer == "producer" && value == "a"
        ),
        "{err}"
    );
    let a = analyse(&g, Order::Topological, Options::NONE).unwrap();
    assert_eq!(
        a.order
            .iter()
            .map(|&n| g.node(n).name.as_str())
            .collect::<Vec<_>>(),
        ["producer", "late_reader"]
    );

    let err = analyse(
        &load("dangling.json"),
        Order::Topological,
        Options::default(),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            memplan_graph::AnalysisError::Order(OrderError::DanglingInput { ref node, ref value })
                if node == "add" && value == "ghost"
        ),
        "{err}"
    );
}

#[test]
fn control_edges_are_respected() {
    let g = load("control_edges.json");
    let err = analyse(&g, Order::File, Options::default()).unwrap_err();
    assert!(
        err.to_string().contains("control edge 'right' -> 'left'"),
        "{err}"
    );
    let a = analyse(&g, Order::Topological, Options::NONE).unwrap();
    assert_eq!(
        a.order
            .iter()
            .map(|&n| g.node(n).name.as_str())
            .collect::<Vec<_>>(),
        ["right", "left"]
    );
    // Both outputs live to the last step; b has only bytes.
    assert_eq!(
        rows(&g, &a),
        vec![
            row("x", 0, 3, "", ""),
            row("b", 1, 3, "", ""),
            row("a", 2, 3, "", "")
        ]
    );
}

#[test]
fn every_data_file_round_trips_through_the_writer() {
    for name in [
        "small_cnn.json",
        "views.json",
        "inplace.json",
        "cycle.json",
        "read_before_produce.json",
        "dangling.json",
        "control_edges.json",
    ] {
        let g = load(name);
        let text = write_graph_json(&g);
        let back = read_graph_json(&text, name).unwrap();
        assert_eq!(back, g, "{name}");
        assert_eq!(write_graph_json(&back), text, "{name}");
    }
}

#[test]
fn reader_errors_say_where_and_what() {
    let cases: &[(&str, &[&str])] = &[
        ("{\"values\": [{\"name\": \"a\", \"dtype\": \"FLOAT\"}]}", &["values[0] 'a'", "shape", "bytes"]),
        ("{\"values\": [{\"name\": \"a\", \"dtype\": \"FLOAT32\", \"bytes\": 4}]}", &["values[0] 'a'.dtype", "FLOAT32", "FLOAT, UINT8"]),
        ("{\"values\": [{\"name\": \"a\", \"dtype\": \"FLOAT\", \"shape\": [2], \"bytes\": 4}]}", &["values[0] 'a'.bytes", "gives 8 bytes"]),
        ("{\"nodes\": [{\"name\": \"n\", \"op\": \"Relu\", \"inputs\": [\"nope\"]}]}", &["nodes[0] 'n'.inputs[0]", "unknown value 'nope'"]),
        ("{\"outputs\": [\"z\"]}", &["outputs[0]", "'z'"]),
        ("{\"nodes\": [{\"name\": \"n\"}]}", &["line 1", "op"]),
        ("{\"nodez\": []}", &["line 1", "nodez"]),
        ("{\"values\": [{\"name\": \"a\", \"dtype\": \"FLOAT\", \"bytes\": 4}], \"nodes\": [{\"name\": \"n\", \"op\": \"Relu\", \"outputs\": [\"a\"], \"attributes\": {\"x\": [1, \"s\"]}}]}", &["nodes[0] 'n'.attributes.x", "only numbers or only strings"]),
        ("{\"nodes\": [{\"name\": \"a\", \"op\": \"Relu\"}], \"control_edges\": [[\"a\", \"b\"]]}", &["control_edges[0]", "unknown node 'b'"]),
        ("[1, 2", &["line 1"]),
        ("{\"values\": [{\"name\": \"a\", \"dtype\": \"FLOAT\", \"bytes\": 4}, {\"name\": \"a\", \"dtype\": \"FLOAT\", \"bytes\": 4}]}", &["values[1] 'a'", "twice"]),
    ];
    for (text, needles) in cases {
        let err = read_graph_json(text, "g.json").unwrap_err().to_string();
        assert!(err.starts_with("g.json: "), "{err}");
        for needle in *needles {
            assert!(err.contains(needle), "{text}: {err} lacks {needle:?}");
        }
    }
}

/// Every latency comes back bit for bit, whatever the decimal the writer chose for it: the
/// reader rounds decimals correctly (serde_json's `float_roundtrip`; without it,
/// 2.2222222222222222e101 came back as 2.2222222222222226e101, found by the
/// `pipedream_reader` fuzz target).
#[test]
fn latencies_round_trip_bit_for_bit() {
    let latencies = [
        "2.2222222222222222e101",
        "0.30000000000000004",
        "1.7976931348623157e308",
        "2.2250738585072014e-308",
        "5e-324",
        "123456789.12345679",
        "9.999999999999999e22",
    ];
    for text in latencies {
        let expected: f64 = text.parse().unwrap();
        let json = format!(r#"{{"nodes": [{{"name": "n", "op": "Relu", "latency_ms": {text}}}]}}"#);
        let graph = read_graph_json(&json, "g.json").unwrap();
        let latency = graph.nodes()[0].latency_ms.unwrap();
        assert_eq!(
            latency.to_bits(),
            expected.to_bits(),
            "{text} read as {latency:e}"
        );
        let back = read_graph_json(&write_graph_json(&graph), "w.json").unwrap();
        assert_eq!(back, graph, "{text}");
    }
}
