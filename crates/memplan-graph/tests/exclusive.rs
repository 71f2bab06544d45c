//! The `exclusive` method from the graph: the exclusivity rules, the worked example and rule 4.

use std::collections::BTreeMap;

use memplan::checker::check;
use memplan::planner::{exclusive_stats, Exclusive, Planner};
use memplan::{BufferId, Problem};
use memplan_graph::{
    analyse, exclusive_problem, exclusivity, DType, Graph, Options, Order, Reason, Rules, Value,
    ValueId, ValueKind,
};

const MB: u64 = 1 << 20;

/// A graph of one-output operators: `ops[i] = (name, bytes, inputs by op index)`; values
/// named after their operators; `outputs` are graph outputs.
fn graph(ops: &[(&str, u64, &[usize])], outputs: &[usize]) -> Graph {
    let mut g = Graph::new("g");
    let values: Vec<ValueId> = ops
        .iter()
        .map(|&(name, bytes, _)| {
            g.add_value(Value::with_bytes(
                name,
                DType::Float,
                bytes,
                ValueKind::Activation,
            ))
            .unwrap()
        })
        .collect();
    for (i, &(name, _, inputs)) in ops.iter().enumerate() {
        let inputs = inputs.iter().map(|&j| Some(values[j])).collect();
        g.add_node(
            format!("n_{name}"),
            "Op",
            inputs,
            vec![values[i]],
            BTreeMap::new(),
        )
        .unwrap();
    }
    g.set_outputs(outputs.iter().map(|&i| values[i]).collect())
        .unwrap();
    g
}

/// The worked example: edges 1→2, 2→3, 2→4, 2→5, 3→6, 4→7, 6→7, 7→8 (the `exclusive` method,
/// corrected: the source's "op6 and op8" is a typo for 7→8); 5 and 8 are the network
/// outputs.
fn worked_example() -> Graph {
    graph(
        &[
            ("op1", 5 * MB, &[]),
            ("op2", 10 * MB, &[0]),
            ("op3", 8 * MB, &[1]),
            ("op4", 20 * MB, &[1]),
            ("op5", 2 * MB, &[1]),
            ("op6", 6 * MB, &[2]),
            ("op7", 15 * MB, &[3, 5]),
            ("op8", 3 * MB, &[6]),
        ],
        &[4, 7],
    )
}

fn pairs_of(problem: &Problem) -> Vec<(u32, u32)> {
    problem
        .conflicts()
        .iter()
        .map(|&(a, b)| (a.0 + 1, b.0 + 1))
        .collect()
}

#[test]
fn worked_example_from_the_rules() {
    let g = worked_example();
    let analysis = analyse(&g, Order::File, Options::NONE).unwrap();
    let problem = exclusive_problem(&g, &analysis, Rules::ALL).unwrap();
    // The method's table, exactly: 15 pairs, every one from rules 1-3 (rule 4 adds none).
    let mut expected = vec![
        (1, 2),
        (2, 3),
        (2, 4),
        (2, 5),
        (3, 4),
        (3, 5),
        (3, 6),
        (4, 5),
        (4, 6),
        (4, 7),
        (5, 6),
        (5, 7),
        (5, 8),
        (6, 7),
        (7, 8),
    ];
    expected.sort_unstable();
    assert_eq!(expected.len(), 15);
    assert_eq!(pairs_of(&problem), expected);
    let derived = exclusivity(&g, &analysis, Rules::ALL);
    assert!(derived.pairs.iter().all(|p| p.2 != Reason::LiveTogether));
    // The table as the method prints it: every operator's exclusive set.
    let table: &[(u32, &[u32])] = &[
        (1, &[2]),
        (2, &[1, 3, 4, 5]),
        (3, &[2, 4, 5, 6]),
        (4, &[2, 3, 5, 6, 7]),
        (5, &[2, 3, 4, 6, 7, 8]),
        (6, &[3, 4, 5, 7]),
        (7, &[4, 5, 6, 8]),
        (8, &[5, 7]),
    ];
    for &(op, set) in table {
        let mut partners: Vec<u32> = expected
            .iter()
            .filter_map(|&(a, b)| match (a == op, b == op) {
                (true, _) => Some(b),
                (_, true) => Some(a),
                _ => None,
            })
            .collect();
        partners.sort_unstable();
        assert_eq!(partners, set, "exclusive set of op{op}");
    }
    let plan = Exclusive::DEFAULT.plan(&problem).unwrap();
    let report = check(&problem, &plan);
    assert!(report.is_valid(), "{:?}", report.violations);
    assert_eq!(report.arena_bytes, Some(46 * MB));
    // The walk-through: op4 [0,20), op7 [20,35), op2 [20,30), op3 [30,38), op6 [38,44),
    // op1 [0,5), op8 inside op4 (not exclusive with op4 or op1), op5 [44,46).
    let at = |op: usize| plan.offsets[op - 1] / MB;
    assert_eq!(
        [at(4), at(7), at(2), at(3), at(6), at(1), at(5)],
        [0, 20, 20, 30, 38, 0, 44]
    );
    assert!(
        at(8) + 3 <= 20,
        "op8 at {} MB is not inside op4 [0, 20)",
        at(8)
    );
    assert_eq!(problem.total_size(), Some(69 * MB));
    let stats = exclusive_stats(&problem, &plan).unwrap();
    assert_eq!(stats.new_pool_bytes, 46 * MB);
    // Any exclusive plan of the graph is also valid for its one execution order.
    assert!(check(&analysis.problem, &plan).is_valid());
}

#[test]
fn rules_can_be_switched_off() {
    let g = worked_example();
    let analysis = analyse(&g, Order::File, Options::NONE).unwrap();
    let all = exclusivity(&g, &analysis, Rules::ALL);
    let reasons = |rules: Rules| {
        exclusivity(&g, &analysis, rules)
            .pairs
            .iter()
            .map(|p| p.2)
            .collect::<Vec<_>>()
    };
    assert!(all.pairs.iter().any(|p| p.2 == Reason::Branches));
    let no_branches = reasons(Rules {
        branches: false,
        ..Rules::ALL
    });
    assert!(!no_branches.contains(&Reason::Branches));
    assert!(reasons(Rules::NONE)
        .iter()
        .all(|&r| r == Reason::LiveTogether));
    // Fewer rules never give more pairs, and every plan stays valid for the order.
    let mut previous = usize::MAX;
    for rules in [
        Rules::ALL,
        Rules {
            branches: false,
            ..Rules::ALL
        },
        Rules::NONE,
    ] {
        let problem = exclusive_problem(&g, &analysis, rules).unwrap();
        assert!(problem.conflicts().len() <= previous);
        previous = problem.conflicts().len();
        let plan = Exclusive::DEFAULT.plan(&problem).unwrap();
        assert!(check(&problem, &plan).is_valid());
        assert!(check(&analysis.problem, &plan).is_valid());
    }
    assert_eq!(
        Rules::parse("edges,outputs").unwrap(),
        Rules {
            branches: false,
            ..Rules::ALL
        }
    );
    assert_eq!(Rules::parse("none").unwrap(), Rules::NONE);
    assert!(Rules::parse("edge")
        .unwrap_err()
        .contains("edges, branches, outputs"));
}

/// A ResNet-style skip: `a` feeds `b` and, much later, `z`; `m` lies on a path from `a`,
/// so no rule of 1-3 makes `a` and `m` exclusive, yet `a` is live while `m` runs.
#[test]
fn rule_4_keeps_a_skip_connection_alive() {
    let g = graph(
        &[
            ("a", 8, &[]),
            ("b", 2, &[0]),
            ("m", 8, &[1]),
            ("z", 2, &[2, 0]),
        ],
        &[3],
    );
    let analysis = analyse(&g, Order::File, Options::NONE).unwrap();
    let exclusive = exclusivity(&g, &analysis, Rules::ALL);
    assert!(exclusive
        .pairs
        .contains(&(BufferId(0), BufferId(2), Reason::LiveTogether)));
    let problem = exclusive_problem(&g, &analysis, Rules::ALL).unwrap();
    let plan = Exclusive::DEFAULT.plan(&problem).unwrap();
    assert!(check(&problem, &plan).is_valid());
    assert!(check(&analysis.problem, &plan).is_valid());

    // Rules 1-3 alone let m write over a before z reads it.
    let rules_1_to_3 = Problem::new(
        problem.buffers().to_vec(),
        exclusive
            .pairs
            .iter()
            .filter(|p| p.2 != Reason::LiveTogether)
            .map(|p| (p.0, p.1)),
    )
    .unwrap();
    let unsafe_plan = Exclusive::DEFAULT.plan(&rules_1_to_3).unwrap();
    assert!(check(&rules_1_to_3, &unsafe_plan).is_valid());
    assert_eq!(unsafe_plan.offsets[0], unsafe_plan.offsets[2]);
    assert!(!check(&analysis.problem, &unsafe_plan).is_valid());
}

/// The pair-by-pair definition of the exclusive pairs (the former O(blocks²) search,
/// with reachability by depth-first search): the reference for [`exclusivity`].
fn reference(
    g: &Graph,
    analysis: &memplan_graph::Analysis,
    rules: Rules,
) -> Vec<(u32, u32, Reason)> {
    let nodes = g.nodes();
    let n = nodes.len();
    let mut successors: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, node) in nodes.iter().enumerate() {
        for &out in &node.outputs {
            successors[i].extend(g.value(out).consumers.iter().map(|&(c, _)| c.index()));
        }
    }
    for &(from, to) in g.control_edges() {
        successors[from.index()].push(to.index());
    }
    let reaches = |a: usize, b: usize| {
        let mut seen = vec![false; n];
        let mut stack = successors[a].clone();
        while let Some(x) = stack.pop() {
            if x == b {
                return true;
            }
            if !std::mem::replace(&mut seen[x], true) {
                stack.extend(&successors[x]);
            }
        }
        false
    };
    let mut position = vec![0usize; n];
    for (p, node) in analysis.order.iter().enumerate() {
        position[node.index()] = p;
    }
    let feeds = |a: usize, b: usize| {
        nodes[a]
            .outputs
            .iter()
            .any(|&v| g.value(v).consumers.iter().any(|&(c, _)| c.index() == b))
    };
    let is_sink = |a: usize| {
        nodes[a]
            .outputs
            .iter()
            .all(|&v| g.value(v).consumers.is_empty())
    };
    let node_reason = |a: usize, b: usize| -> Option<Reason> {
        if a == b {
            return None;
        }
        if rules.edges && (feeds(a, b) || feeds(b, a)) {
            return Some(Reason::Edge);
        }
        if rules.branches && !reaches(a, b) && !reaches(b, a) {
            return Some(Reason::Branches);
        }
        let output_before = |x: usize, y: usize| is_sink(x) && position[y] > position[x];
        if rules.outputs && (output_before(a, b) || output_before(b, a)) {
            return Some(Reason::Output);
        }
        None
    };
    let producers: Vec<Vec<usize>> = analysis
        .buffer_values
        .iter()
        .map(|values| {
            values
                .iter()
                .filter_map(|&v| g.value(v).producer.map(|(n, _)| n.index()))
                .collect()
        })
        .collect();
    let buffers = analysis.problem.buffers();
    let mut pairs = Vec::new();
    for a in 0..buffers.len() {
        for b in a + 1..buffers.len() {
            let by_rule = producers[a]
                .iter()
                .flat_map(|&x| producers[b].iter().map(move |&y| (x, y)))
                .filter_map(|(x, y)| node_reason(x, y))
                .min();
            let reason = by_rule.or_else(|| {
                buffers[a]
                    .live_together(&buffers[b])
                    .then_some(Reason::LiveTogether)
            });
            if let Some(reason) = reason {
                pairs.push((a as u32, b as u32, reason));
            }
        }
    }
    pairs
}

/// Node `i` of a random graph: `(op, outputs, input picks, control edge pick)`. Views and
/// elementwise operators make alias and in-place blocks of several values; nodes with
/// two outputs produce two blocks; control edges join otherwise parallel nodes.
type RandomNode = (usize, usize, Vec<usize>, Option<usize>);

fn random_graph(spec: &[RandomNode], outputs: &[usize]) -> Graph {
    const OPS: &[&str] = &["Relu", "Add", "Reshape", "Conv", "Split"];
    let mut g = Graph::new("random");
    let x = g
        .add_value(Value::with_bytes("x", DType::Float, 16, ValueKind::Input))
        .unwrap();
    let mut available = vec![x];
    let mut ids = Vec::new();
    for (i, (op, outs, picks, control)) in spec.iter().enumerate() {
        let outs: Vec<ValueId> = (0..*outs)
            .map(|k| {
                g.add_value(Value::with_bytes(
                    format!("v{i}_{k}"),
                    DType::Float,
                    8 * (1 + ((i + k) % 3) as u64),
                    ValueKind::Activation,
                ))
                .unwrap()
            })
            .collect();
        let inputs = picks
            .iter()
            .map(|p| Some(available[p % available.len()]))
            .collect();
        let id = g
            .add_node(
                format!("n{i}"),
                OPS[*op],
                inputs,
                outs.clone(),
                BTreeMap::new(),
            )
            .unwrap();
        if let (Some(c), false) = (control, ids.is_empty()) {
            g.add_control_edge(ids[c % ids.len()], id).unwrap();
        }
        ids.push(id);
        available.extend(outs);
    }
    let outs: Vec<ValueId> = outputs
        .iter()
        .map(|&o| available[o % available.len()])
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    g.set_inputs(vec![x]).unwrap();
    g.set_outputs(outs).unwrap();
    g
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// The bitset search finds exactly the reference's pairs and reasons, for every rule
    /// setting, with and without aliasing and in-place sharing.
    #[test]
    fn exclusivity_matches_the_pairwise_reference(
        spec in proptest::collection::vec(
            (0usize..5, 1usize..3, proptest::collection::vec(0usize..64, 1..3),
             proptest::option::weighted(0.2, 0usize..64)),
            0..40,
        ),
        outputs in proptest::collection::vec(0usize..64, 0..3),
        rule_bits in 0u8..8,
        sharing in proptest::bool::ANY,
    ) {
        let g = random_graph(&spec, &outputs);
        let options = if sharing { Options::default() } else { Options::NONE };
        let analysis = analyse(&g, Order::File, options).unwrap();
        let rules = Rules {
            edges: rule_bits & 1 != 0,
            branches: rule_bits & 2 != 0,
            outputs: rule_bits & 4 != 0,
        };
        let found: Vec<(u32, u32, Reason)> = exclusivity(&g, &analysis, rules)
            .pairs
            .iter()
            .map(|&(a, b, r)| (a.0, b.0, r))
            .collect();
        proptest::prop_assert_eq!(found, reference(&g, &analysis, rules));
    }
}
