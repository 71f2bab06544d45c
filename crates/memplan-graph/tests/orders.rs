//! The all-orders mode of the `exclusive` method (corrected): plans valid for every execution order
//! the edges allow, and the check of that property (`memplan::checker::check_all_orders`).

use std::collections::BTreeMap;

use memplan::checker::{check, check_all_orders};
use memplan::planner::{Exclusive, Planner};
use memplan::Plan;
use memplan_graph::{
    all_orders_problem, analyse, dataflow, exclusive_problem, DType, Graph, Options, Order, Rules,
    Value, ValueId, ValueKind,
};

/// One operator: its output's bytes and the operators it reads (lower indices).
type Spec = Vec<(u64, Vec<usize>)>;

/// The graph of `spec` with its nodes added in `order` (a topological order of `spec`):
/// graph input `x` read by operator 0, operator `i` writes `v{i}`; every operator whose
/// output nobody reads is a graph output.
fn build(spec: &Spec, order: &[usize]) -> Graph {
    let mut g = Graph::new("random");
    let x = g
        .add_value(Value::with_bytes(
            "x",
            DType::Float,
            8,
            ValueKind::Activation,
        ))
        .unwrap();
    let values: Vec<ValueId> = spec
        .iter()
        .enumerate()
        .map(|(i, (bytes, _))| {
            g.add_value(Value::with_bytes(
                format!("v{i}"),
                DType::Float,
                *bytes,
                ValueKind::Activation,
            ))
            .unwrap()
        })
        .collect();
    for &i in order {
        let mut inputs: Vec<Option<ValueId>> = spec[i].1.iter().map(|&j| Some(values[j])).collect();
        if i == 0 {
            inputs.push(Some(x));
        }
        g.add_node(
            format!("n{i}"),
            "Op",
            inputs,
            vec![values[i]],
            BTreeMap::new(),
        )
        .unwrap();
    }
    g.set_inputs(vec![x]).unwrap();
    let read: Vec<bool> = (0..spec.len())
        .map(|i| spec.iter().any(|(_, ins)| ins.contains(&i)))
        .collect();
    g.set_outputs(
        (0..spec.len())
            .filter(|&i| !read[i])
            .map(|i| values[i])
            .collect(),
    )
    .unwrap();
    g
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, bound: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % bound as u64) as usize
    }
}

fn random_spec(rng: &mut Rng) -> Spec {
    let n = 2 + rng.below(11);
    (0..n)
        .map(|i| {
            let bytes = 8 * (1 + rng.below(16)) as u64;
            let mut inputs: Vec<usize> = if i == 0 {
                vec![]
            } else {
                (0..1 + rng.below(3)).map(|_| rng.below(i)).collect()
            };
            inputs.sort_unstable();
            inputs.dedup();
            (bytes, inputs)
        })
        .collect()
}

/// A random topological order of `spec` (Kahn's algorithm, a random ready node each time).
fn random_order(spec: &Spec, rng: &mut Rng) -> Vec<usize> {
    let n = spec.len();
    let mut waiting: Vec<usize> = spec.iter().map(|(_, ins)| ins.len()).collect();
    let mut ready: Vec<usize> = (0..n).filter(|&i| waiting[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while !ready.is_empty() {
        let i = ready.swap_remove(rng.below(ready.len()));
        order.push(i);
        for (j, (_, ins)) in spec.iter().enumerate() {
            if ins.contains(&i) {
                waiting[j] -= 1;
                if waiting[j] == 0 {
                    ready.push(j);
                }
            }
        }
    }
    assert_eq!(order.len(), n);
    order
}

/// `plan` (of a problem with these buffer names) moved onto `other`'s buffers by name.
fn same_offsets(names: &[String], plan: &Plan, other: &memplan::Problem) -> Plan {
    let offsets = other
        .buffers()
        .iter()
        .map(|b| {
            let k = names
                .iter()
                .position(|n| *n == b.name)
                .unwrap_or_else(|| panic!("buffer '{}' is not in the planned problem", b.name));
            plan.offsets[k]
        })
        .collect();
    Plan::new(other, offsets).unwrap()
}

/// Random DAGs planned in the all-orders mode: the plan passes the all-orders check and,
/// for 40 random topological orders each, the ordinary checker on that order's lifetimes.
#[test]
fn all_orders_plans_are_valid_in_every_random_order() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut shared = 0;
    for round in 0..120 {
        let spec = random_spec(&mut rng);
        let identity: Vec<usize> = (0..spec.len()).collect();
        let g = build(&spec, &identity);
        let analysis = analyse(&g, Order::File, Options::NONE).unwrap();
        let problem = all_orders_problem(&g, &analysis).unwrap();
        for planner in [&Exclusive::DEFAULT, &Exclusive::FRAGMENTED] {
            let plan = planner.plan(&problem).unwrap();
            let report = check(&problem, &plan);
            assert!(report.is_valid(), "round {round}: {:?}", report.violations);
            let flow = dataflow(&g, &analysis);
            let unordered = check_all_orders(&analysis.problem, &plan, &flow).unwrap();
            assert!(unordered.is_empty(), "round {round}: {unordered:?}");
            if plan.is_fragmented() {
                continue; // the order simulation below moves offsets, not extents
            }
            let names: Vec<String> = analysis
                .problem
                .buffers()
                .iter()
                .map(|b| b.name.clone())
                .collect();
            let sizes = analysis.problem.total_size().unwrap();
            shared += usize::from(plan.arena_bytes.unwrap() < sizes);
            for _ in 0..40 {
                let order = random_order(&spec, &mut rng);
                let g2 = build(&spec, &order);
                let a2 = analyse(&g2, Order::File, Options::NONE).unwrap();
                let plan2 = same_offsets(&names, &plan, &a2.problem);
                let report = check(&a2.problem, &plan2);
                assert!(
                    report.is_valid(),
                    "round {round}, order {order:?}: {:?}",
                    report.violations
                );
            }
        }
    }
    // The mode shares memory (it is not the naive plan in disguise).
    assert!(shared > 20, "only {shared} of the plans share bytes");
}

/// a → b1 → b2 → d and a → c1 → d, executed a, b1, c1, b2, d. The ordinary exclusive
/// mode (every rule on) may put b2 on a's bytes: a's last reader c1 runs before b2 in this
/// order, and a reaches b2, so no rule keeps them apart. Executed a, b1, b2, c1, d, b2
/// overwrites a before c1 reads it. The all-orders check rejects that plan; the
/// all-orders mode keeps them apart.
#[test]
fn the_ordinary_mode_on_a_diamond_is_rejected_by_the_all_orders_check() {
    // Operators: 0 a, 1 b1, 2 c1, 3 b2, 4 d.
    let spec: Spec = vec![
        (80, vec![]),
        (8, vec![0]),
        (8, vec![0]),
        (80, vec![1]),
        (8, vec![2, 3]),
    ];
    let g = build(&spec, &[0, 1, 2, 3, 4]);
    let analysis = analyse(&g, Order::File, Options::NONE).unwrap();
    let flow = dataflow(&g, &analysis);
    let ordinary = exclusive_problem(&g, &analysis, Rules::ALL).unwrap();
    let plan = Exclusive::DEFAULT.plan(&ordinary).unwrap();
    assert!(check(&ordinary, &plan).is_valid());
    assert!(check(&analysis.problem, &plan).is_valid());
    let unordered = check_all_orders(&analysis.problem, &plan, &flow).unwrap();
    let names: Vec<(&str, &str)> = unordered
        .iter()
        .map(|u| (u.a.as_str(), u.b.as_str()))
        .collect();
    assert!(names.contains(&("v0", "v3")), "{unordered:?}");
    // The danger is real: in the order a, b1, b2, c1, d the same offsets are invalid.
    let other = build(&spec, &[0, 1, 3, 2, 4]);
    let a2 = analyse(&other, Order::File, Options::NONE).unwrap();
    let buffer_names: Vec<String> = analysis
        .problem
        .buffers()
        .iter()
        .map(|b| b.name.clone())
        .collect();
    assert!(!check(
        &a2.problem,
        &same_offsets(&buffer_names, &plan, &a2.problem)
    )
    .is_valid());
    // The all-orders mode: accepted by the check, and still sharing where it may
    // (d is born after everything else is dead except ... x, v0, v1, v2 are all dead).
    let problem = all_orders_problem(&g, &analysis).unwrap();
    let safe = Exclusive::DEFAULT.plan(&problem).unwrap();
    assert!(check(&problem, &safe).is_valid());
    assert!(check_all_orders(&analysis.problem, &safe, &flow)
        .unwrap()
        .is_empty());
    assert!(safe.arena_bytes.unwrap() < analysis.problem.total_size().unwrap());
}
