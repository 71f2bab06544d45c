//! Property tests of `memplan_swap::training` on random forward graphs (elementwise ops,
//! matrix products with weights, shape sub-graphs with integer outputs, unknown ops): the
//! training step is acyclic and timed; its problem plans validly (best-of, checked); every
//! backward node reads what its op's rule names, and those tensors live until it; every
//! gradient is read exactly once, by the backward node of its activation's producer; a
//! backward exists exactly for the nodes on the gradient path.

use std::collections::BTreeMap;

use memplan::planner::{BestOf, Planner};
use memplan_graph::{analyse, DType, Graph, Options, Order, Value, ValueId, ValueKind};
use memplan_swap::timing;
use memplan_swap::training::{backward_reads, training_step, Device, Reads};
use proptest::prelude::*;

const OPS: &[&str] = &["Relu", "Add", "Mul", "MatMul", "Sigmoid", "Shape", "Foo"];

/// One node per entry: `(op index, input picks, is graph output)`.
type Spec = Vec<(usize, Vec<usize>, bool)>;

fn spec() -> impl Strategy<Value = Spec> {
    prop::collection::vec(
        (
            0..OPS.len(),
            prop::collection::vec(any::<usize>(), 2),
            prop::bool::weighted(0.2),
        ),
        1..20,
    )
}

/// Node `i` reads float values picked among the input `x`, the weight `w` (MatMul's
/// second operand always) and earlier float outputs; `Shape` gives an INT64 output that
/// `Foo` may also read.
fn build(spec: &Spec) -> Graph {
    let mut g = Graph::new("random");
    let value = |g: &mut Graph, name: String, dtype, shape: Vec<u64>, kind| {
        g.add_value(Value::with_shape(name, dtype, shape, kind).unwrap())
            .unwrap()
    };
    let x = value(
        &mut g,
        "x".into(),
        DType::Float,
        vec![4, 4],
        ValueKind::Input,
    );
    let w = value(
        &mut g,
        "w".into(),
        DType::Float,
        vec![4, 4],
        ValueKind::Weight,
    );
    let mut floats = vec![x, w];
    let mut ints: Vec<ValueId> = Vec::new();
    let mut outputs = Vec::new();
    for (i, (op, picks, is_output)) in spec.iter().enumerate() {
        let op = OPS[*op];
        let pick = |k: usize| floats[picks[k] % floats.len()];
        let inputs = match op {
            "Relu" | "Sigmoid" | "Shape" => vec![pick(0)],
            "MatMul" => vec![pick(0), w],
            "Foo" if !ints.is_empty() => vec![pick(0), ints[picks[1] % ints.len()]],
            _ => vec![pick(0), pick(1)],
        };
        let out = if op == "Shape" {
            let v = value(
                &mut g,
                format!("v{i}"),
                DType::Int64,
                vec![2],
                ValueKind::Activation,
            );
            ints.push(v);
            v
        } else {
            let v = value(
                &mut g,
                format!("v{i}"),
                DType::Float,
                vec![4, 4],
                ValueKind::Activation,
            );
            floats.push(v);
            v
        };
        if *is_output || i + 1 == spec.len() {
            outputs.push(out);
        }
        g.add_node(
            format!("n{i}"),
            op,
            inputs.into_iter().map(Some).collect(),
            vec![out],
            BTreeMap::new(),
        )
        .unwrap();
    }
    g.set_inputs(vec![x]).unwrap();
    g.set_outputs(outputs).unwrap();
    g
}

proptest! {
    #[test]
    fn training_steps_of_random_graphs_are_valid(spec in spec()) {
        let forward = build(&spec);
        let step = training_step(&forward, &Device::default()).unwrap();
        let g = &step.graph;
        timing::analyse(g).unwrap();
        let analysis = analyse(g, Order::File, Options::NONE).unwrap();
        let plan = BestOf.plan(&analysis.problem).unwrap();
        let report = memplan::checker::check(&analysis.problem, &plan);
        prop_assert!(report.is_valid(), "{:?}", report.violations);
        // Gradient path, computed independently: forward from the weight, then backward
        // from the graph outputs.
        let n = forward.values().len();
        let mut trained = vec![false; n];
        for node in forward.nodes() {
            let from = node.inputs.iter().flatten().any(|v| {
                trained[v.index()] || forward.value(*v).kind == ValueKind::Weight
            });
            for o in &node.outputs {
                trained[o.index()] = from && forward.value(*o).dtype.is_float();
            }
        }
        let mut reaches = vec![false; n];
        for o in forward.outputs() {
            reaches[o.index()] = trained[o.index()];
        }
        let mut has_backward = vec![false; forward.nodes().len()];
        for (i, node) in forward.nodes().iter().enumerate().rev() {
            let receives = node.outputs.iter().any(|o| reaches[o.index()]);
            let reads_weight = node.inputs.iter().flatten().any(|v| forward.value(*v).kind == ValueKind::Weight);
            let grad_inputs: Vec<ValueId> = node.inputs.iter().flatten().copied().filter(|v| trained[v.index()]).collect();
            has_backward[i] = receives && (reads_weight || !grad_inputs.is_empty());
            if has_backward[i] {
                for v in grad_inputs {
                    reaches[v.index()] = true;
                }
            }
        }
        for (i, node) in forward.nodes().iter().enumerate() {
            prop_assert_eq!(step.backward_node[i].is_some(), has_backward[i], "{}", node.name);
            let Some(b) = step.backward_node[i] else { continue };
            let bnode = g.node(b);
            let slot = |k: usize| node.inputs.get(k).copied().flatten();
            let needed: Vec<ValueId> = match backward_reads(&node.op_type) {
                Reads::Nothing => vec![],
                Reads::Inputs(slots) => slots.iter().filter_map(|&k| slot(k)).collect(),
                Reads::Outputs => node.outputs.clone(),
                Reads::InputsAndOutputs(slots) => {
                    let mut v: Vec<ValueId> = slots.iter().filter_map(|&k| slot(k)).collect();
                    v.extend(&node.outputs);
                    v
                }
                Reads::AllInputs => node.inputs.iter().flatten().copied().collect(),
            };
            for v in needed {
                prop_assert!(bnode.inputs.contains(&Some(v)), "{} misses {}", bnode.name, g.value(v).name);
                if let Some(life) = analysis.values[v.index()].lifetime {
                    prop_assert!(life.end > b.0 as u64 + 1);
                }
            }
        }
        // Every gradient is read once, by the backward of its activation's producer.
        for v in g.values().iter().filter(|v| v.name.starts_with("grad:")) {
            let of = v.name.rsplit_once("->").unwrap().1;
            let producer = forward.value(forward.value_by_name(of).unwrap()).producer.unwrap().0;
            let reader = step.backward_node[producer.index()].unwrap();
            prop_assert_eq!(&v.consumers, &vec![(reader, v.consumers[0].1)], "{}", v.name);
        }
    }
}
