//! methods.md §1 from the graph: the exclusivity rules, the worked example and rule 4.

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

/// The worked example: edges 1→2, 2→3, 2→4, 2→5, 3→6, 4→7, 6→7, 6→8; 5 and 8 are
/// network outputs (7 feeds nothing either).
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
            ("op8", 3 * MB, &[5]),
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
    // The method's table plus 6–8 (an edge) and 4–8 (no path): methods.md §1.
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
        (6, 8),
        (4, 8),
    ];
    expected.sort_unstable();
    assert_eq!(pairs_of(&problem), expected);
    let plan = Exclusive.plan(&problem).unwrap();
    let report = check(&problem, &plan);
    assert!(report.is_valid(), "{:?}", report.violations);
    assert_eq!(report.arena_bytes, Some(46 * MB));
    let at = |op: usize| plan.offsets[op - 1] / MB;
    assert_eq!(
        [at(4), at(7), at(2), at(3), at(6), at(1), at(8), at(5)],
        [0, 20, 20, 30, 38, 0, 35, 44]
    );
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
        let plan = Exclusive.plan(&problem).unwrap();
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
    let plan = Exclusive.plan(&problem).unwrap();
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
    let unsafe_plan = Exclusive.plan(&rules_1_to_3).unwrap();
    assert!(check(&rules_1_to_3, &unsafe_plan).is_valid());
    assert_eq!(unsafe_plan.offsets[0], unsafe_plan.offsets[2]);
    assert!(!check(&analysis.problem, &unsafe_plan).is_valid());
}
