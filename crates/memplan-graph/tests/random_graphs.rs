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
