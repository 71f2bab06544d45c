//! Property tests on random DAGs: the analysis's invariants, with and without sharing.

use std::collections::BTreeMap;

use memplan::{checker, planner};
use memplan_graph::{
    analyse, read_graph_json, write_graph_json, DType, Graph, Options, Order, Role, Value, ValueId,
    ValueKind,
};
use proptest::prelude::*;

const OPS: &[&str] = &["Relu", "Add", "Reshape", "Conv", "Identity", "Mul"];

/// One node per entry: `(op index, size class, input picks, is graph output)`.
type Spec = Vec<(usize, u64, Vec<usize>, bool)>;

fn spec() -> impl Strategy<Value = Spec> {
    prop::collection::vec(
        (
            0..OPS.len(),
            1u64..4,
            prop::collection::vec(any::<usize>(), 1..4),
            prop::bool::weighted(0.2),
        ),
        0..24,
    )
}

/// Node `i` reads values picked among the input `x`, a weight and the earlier outputs.
fn build(spec: &Spec, shuffle: bool) -> Graph {
    let mut g = Graph::new("random");
    let x = g
        .add_value(Value::with_bytes("x", DType::Float, 16, ValueKind::Input))
        .unwrap();
    let w = g
        .add_value(Value::with_bytes("w", DType::Float, 8, ValueKind::Weight))
        .unwrap();
    let mut available = vec![x, w];
    let mut outputs = Vec::new();
    let mut nodes = Vec::new();
    for (i, (op, size, picks, is_output)) in spec.iter().enumerate() {
        let out = g
            .add_value(Value::with_bytes(
                format!("v{i}"),
                DType::Float,
                size * 8,
                ValueKind::Activation,
            ))
            .unwrap();
        let inputs: Vec<Option<ValueId>> = picks
            .iter()
            .map(|p| Some(available[p % available.len()]))
            .collect();
        nodes.push((format!("n{i}"), OPS[*op], inputs, out));
        available.push(out);
        if *is_output {
            outputs.push(out);
        }
    }
    if shuffle {
        nodes.reverse();
    }
    for (name, op, inputs, out) in nodes {
        g.add_node(name, op, inputs, vec![out], BTreeMap::new())
            .unwrap();
    }
    g.set_inputs(vec![x]).unwrap();
    g.set_outputs(outputs).unwrap();
    g
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn analysis_invariants(spec in spec(), shuffle in any::<bool>()) {
        let g = build(&spec, shuffle);
        let order = if shuffle { Order::Topological } else { Order::File };
        let plain = analyse(&g, order, Options::NONE).unwrap();
        let shared = analyse(&g, order, Options::default()).unwrap();
        let last = plain.last_step;
        for a in [&plain, &shared] {
            for (index, info) in a.values.iter().enumerate() {
                if !info.role.in_arena() {
                    prop_assert!(info.lifetime.is_none() && info.buffer.is_none());
                    continue;
                }
                let l = info.lifetime.unwrap();
                prop_assert!(l.start < l.end && l.end <= last + 1, "value {index}: {l}");
                if info.role == Role::Output || info.role == Role::Input && g.outputs().contains(&ValueId(index as u32)) {
                    prop_assert_eq!(l.end, last + 1);
                }
                let b = a.problem.buffer(info.buffer.unwrap());
                prop_assert!(b.lifetime.start <= l.start && l.end <= b.lifetime.end);
            }
            let plan = planner::by_name("best-of").unwrap().plan(&a.problem).unwrap();
            prop_assert!(checker::check(&a.problem, &plan).is_valid());
            // No value is overwritten while live: whoever shares a buffer with an in-place
            // output y and existed before y's step is dead by then, and no graph input or
            // output is overwritten (one may join the group later, as a view of y).
            for members in &a.buffer_values {
                for &y in members {
                    if a.values[y.index()].inplace_of.is_none() {
                        continue;
                    }
                    let s = a.values[y.index()].lifetime.unwrap().start;
                    for &m in members {
                        let lm = a.values[m.index()].lifetime.unwrap();
                        if g.outputs().contains(&m) || g.inputs().contains(&m) {
                            prop_assert!(lm.start > s, "{} overwritten", g.value(m).name);
                        }
                        if m != y && lm.start < s {
                            prop_assert!(lm.end <= s + 1, "{} overwritten while live", g.value(m).name);
                        }
                    }
                }
            }
        }
        prop_assert!(plain.buffer_values.iter().all(|m| m.len() == 1));
        prop_assert!(shared.stats.max_live_bytes <= plain.stats.max_live_bytes);
        prop_assert_eq!(shared.stats.max_live_unshared_bytes, plain.stats.max_live_bytes);
        prop_assert_eq!(
            shared.stats.alias_saved_bytes + shared.stats.inplace_saved_bytes,
            plain.problem.total_size().unwrap() - shared.problem.total_size().unwrap()
        );
        let text = write_graph_json(&g);
        prop_assert_eq!(read_graph_json(&text, "random").unwrap(), g);
    }
}

/// Nodes reading arbitrary values (earlier, later, their own, missing) plus random control
/// edges: cycles, reads before production and dangling values all occur.
fn wild(reads: &[Vec<usize>], edges: &[(usize, usize)]) -> Graph {
    let n = reads.len();
    let mut g = Graph::new("wild");
    let x = g
        .add_value(Value::with_bytes("x", DType::Float, 8, ValueKind::Input))
        .unwrap();
    let ghost = g
        .add_value(Value::with_bytes(
            "ghost",
            DType::Float,
            8,
            ValueKind::Activation,
        ))
        .unwrap();
    let outs: Vec<ValueId> = (0..n)
        .map(|i| {
            g.add_value(Value::with_bytes(
                format!("v{i}"),
                DType::Float,
                8,
                ValueKind::Activation,
            ))
            .unwrap()
        })
        .collect();
    for (i, picks) in reads.iter().enumerate() {
        let inputs = picks
            .iter()
            .map(|&p| match p % (n + 8) {
                k if k < n => Some(outs[k]),
                k if k == n => Some(ghost),
                _ => Some(x),
            })
            .collect();
        g.add_node(
            format!("n{i}"),
            "Add",
            inputs,
            vec![outs[i]],
            BTreeMap::new(),
        )
        .unwrap();
    }
    for &(a, b) in edges {
        if n > 0 {
            let (a, b) = (
                memplan_graph::NodeId((a % n) as u32),
                memplan_graph::NodeId((b % n) as u32),
            );
            g.add_control_edge(a, b).unwrap();
        }
    }
    g.set_inputs(vec![x]).unwrap();
    g
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn orders_are_topological_and_errors_are_right(
        reads in prop::collection::vec(prop::collection::vec(any::<usize>(), 0..3), 0..10),
        edges in prop::collection::vec((any::<usize>(), any::<usize>()), 0..3),
    ) {
        use memplan_graph::{execution_order, OrderError};
        let g = wild(&reads, &edges);
        // deps[i]: nodes node i must follow.
        let mut deps: Vec<Vec<usize>> = vec![Vec::new(); g.nodes().len()];
        let mut dangling = false;
        for (i, node) in g.nodes().iter().enumerate() {
            for &v in node.inputs.iter().flatten() {
                match g.value(v).producer {
                    Some((p, _)) => deps[i].push(p.index()),
                    None => dangling |= g.value(v).kind == ValueKind::Activation,
                }
            }
        }
        for &(a, b) in g.control_edges() {
            deps[b.index()].push(a.index());
        }
        let file_ok = deps.iter().enumerate().all(|(i, d)| d.iter().all(|&p| p < i));
        let topo = execution_order(&g, Order::Topological);
        let file = execution_order(&g, Order::File);
        if dangling {
            prop_assert!(matches!(topo, Err(OrderError::DanglingInput { .. })), "{:?}", topo);
            prop_assert!(matches!(file, Err(OrderError::DanglingInput { .. })), "{:?}", file);
            return Ok(());
        }
        match topo {
            Ok(order) => {
                let mut position = vec![usize::MAX; order.len()];
                for (k, id) in order.iter().enumerate() {
                    position[id.index()] = k;
                }
                prop_assert!(position.iter().all(|&p| p != usize::MAX));
                for (i, d) in deps.iter().enumerate() {
                    prop_assert!(d.iter().all(|&p| position[p] < position[i]));
                }
                if file_ok {
                    prop_assert_eq!(order, file.unwrap());
                } else {
                    prop_assert!(file.is_err());
                }
            }
            Err(OrderError::Cycle { nodes }) => {
                // Each named node depends on the one before it, the first on the last.
                prop_assert!(!nodes.is_empty());
                let id = |name: &String| g.node_by_name(name).unwrap().index();
                for k in 0..nodes.len() {
                    let prev = id(&nodes[(k + nodes.len() - 1) % nodes.len()]);
                    prop_assert!(deps[id(&nodes[k])].contains(&prev), "{:?}", nodes);
                }
                prop_assert!(matches!(file, Err(OrderError::Cycle { .. })), "{:?}", file);
            }
            Err(other) => prop_assert!(false, "unexpected {}", other),
        }
    }
}
