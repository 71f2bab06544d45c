//! Randomised validity of the rewriting and the simulator on training steps built from
//! random PipeDream-like profiles (layers with random times, sizes, skip edges and
//! in-place layers).

use memplan_graph::{analyse as analyse_memory, read_graph_json, write_graph_json, Attribute};
use memplan_graph::{Graph, ValueId};
use memplan_swap::fuzzing::{profile_text, Layer};
use memplan_swap::pipedream::{parse, training_step};
use memplan_swap::planner::{group_candidates, plan, Goal, Improvements, Planner, Setup};
use memplan_swap::rewrite::{
    check, retime_restores, rewrite, Codec, Options, Prefetch, Reduction, Serialize, RECOMPUTE,
    RECOMPUTES, SWAP_IN, SWAP_OUT,
};
use memplan_swap::select::{candidates, Params};
use memplan_swap::simulate::{is_host, no_swap, simulate, Machine};
use memplan_swap::timing::analyse;
use proptest::prelude::*;

fn layers() -> impl Strategy<Value = Vec<Layer>> {
    prop::collection::vec(
        (
            0u32..6,
            0u32..10,
            1u32..2000,
            prop::bool::weighted(0.25),
            prop::collection::vec(0usize..6, 0..2),
        ),
        1..25,
    )
}

fn reduction() -> impl Strategy<Value = Reduction> {
    prop_oneof![
        Just(Reduction::SWAP),
        Just(Reduction::compress(Codec::Fp16, false)),
        Just(Reduction::compress(Codec::Fp24, true)),
        Just(Reduction::compress(Codec::Int8, true)),
        Just(Reduction::RECOMPUTE),
    ]
}

fn prefetch() -> impl Strategy<Value = Prefetch> {
    prop_oneof![
        Just(Prefetch::Slack),
        Just(Prefetch::Queued),
        (1usize..6).prop_map(Prefetch::Levels),
        Just(Prefetch::None)
    ]
}

/// The largest device tensor.
fn largest(graph: &Graph) -> u64 {
    (0..graph.values().len())
        .map(|k| ValueId(k as u32))
        .filter(|&v| graph.value(v).is_activation() && !is_host(graph, v))
        .map(|v| graph.value(v).bytes)
        .max()
        .unwrap_or(0)
}

/// `graph` with its copies renamed to compute operators, so that every node runs alone,
/// in order, on one stream: the setting of the max-live model.
fn serial(graph: &Graph) -> Graph {
    let mut out = Graph::new(graph.name.clone());
    for value in graph.values() {
        out.add_value(value.clone()).unwrap();
    }
    for node in graph.nodes() {
        let op = match node.op_type.as_str() {
            SWAP_OUT | SWAP_IN => format!("{}Serial", node.op_type),
            other => other.to_string(),
        };
        let id = out
            .add_node(
                node.name.clone(),
                op,
                node.inputs.clone(),
                node.outputs.clone(),
                node.attributes.clone(),
            )
            .unwrap();
        out.set_latency(id, node.latency_ms);
    }
    out.set_inputs(graph.inputs().to_vec()).unwrap();
    out.set_outputs(graph.outputs().to_vec()).unwrap();
    out
}

/// The invariants every rewritten graph keeps.
fn valid(graph: &Graph, machine: &Machine) -> Result<(), TestCaseError> {
    check(graph).map_err(|e| TestCaseError::fail(e.to_string()))?;
    analyse(graph).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let position = |name: &str| graph.node_by_name(name).unwrap();
    for node in graph.nodes() {
        if node.op_type == SWAP_IN {
            let host = node.inputs[0].unwrap();
            prop_assert!(is_host(graph, host));
            let (reduction, _) = graph.value(host).producer.unwrap();
            prop_assert_eq!(&graph.node(reduction).op_type, SWAP_OUT);
            prop_assert!(
                reduction < position(&node.name),
                "restore after its reduction"
            );
        }
    }
    for node in graph.nodes() {
        if node.op_type == RECOMPUTE {
            // It re-runs its producer: same latency, as many inputs, one output of the
            // bytes of the producer's.
            let Some(Attribute::String(of)) = node.attributes.get(RECOMPUTES) else {
                return Err(TestCaseError::fail(format!(
                    "{} names no producer",
                    node.name
                )));
            };
            let producer = graph.node(graph.node_by_name(of).unwrap());
            prop_assert_eq!(node.latency_ms, producer.latency_ms);
            prop_assert_eq!(node.inputs.len(), producer.inputs.len());
            prop_assert_eq!(
                graph.value(node.outputs[0]).bytes,
                graph.value(producer.outputs[0]).bytes
            );
            prop_assert!(graph.node_by_name(of).unwrap() < position(&node.name));
        }
    }
    let run = simulate(graph, machine).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert!(run.peak_bytes >= largest(graph));
    // Written as graph JSON and read back, the graph keeps its host values off the
    // device: the same simulation, and a max-live analysis (`memplan plan`, `bound`)
    // that counts no host value and is the simulation's peak when every node runs alone.
    let back = read_graph_json(&write_graph_json(graph), "rewritten")
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    // (Latencies come back within a rounding of the JSON number, not bit for bit.)
    let again = simulate(&back, machine).unwrap();
    prop_assert_eq!(
        (again.peak_bytes, again.host_peak_bytes),
        (run.peak_bytes, run.host_peak_bytes)
    );
    prop_assert!((again.step_ms - run.step_ms).abs() < 1e-9 * run.step_ms.max(1.0));
    let memory = analyse_memory(
        &back,
        memplan_graph::Order::File,
        memplan_graph::Options::NONE,
    )
    .map_err(|e| TestCaseError::fail(e.to_string()))?;
    for (k, info) in memory.values.iter().enumerate() {
        if is_host(&back, ValueId(k as u32)) {
            prop_assert!(!info.role.in_arena());
        }
    }
    prop_assert_eq!(
        memory.stats.max_live_bytes,
        simulate(&serial(&back), machine).unwrap().peak_bytes
    );
    // Memory never goes below zero (the simulator would fail) and ends at the outputs.
    let outputs: u64 = graph.outputs().iter().map(|&v| graph.value(v).bytes).sum();
    let last = run.profile.last().unwrap();
    prop_assert_eq!(last.device_bytes, outputs);
    prop_assert_eq!(last.host_bytes, 0);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn rewrites_are_valid(
        layers in layers(),
        th_tts in 0u32..8,
        keep in 1usize..12,
        reduction in reduction(),
        prefetch in prefetch(),
        serialize in prop_oneof![Just(Serialize::None), Just(Serialize::Consumer), Just(Serialize::AfterCopy)],
        serialize_restores in any::<bool>(),
        largest_output in any::<bool>(),
        gbps in 1u32..40,
    ) {
        let text = profile_text(&layers);
        let step = training_step(&parse(&text, "random").unwrap()).unwrap();
        let graph = &step.graph;
        let machine = Machine::link(gbps as f64 * 1e3);
        // Without copies the simulator is the no-swap baseline.
        let base = no_swap(graph).unwrap();
        let run = simulate(graph, &machine).unwrap();
        prop_assert_eq!(run.peak_bytes, base.peak_bytes);
        prop_assert!((run.step_ms - base.step_ms).abs() < 1e-9);
        let options = Options {
            reduction,
            serialize_reductions: serialize,
            serialize_restores,
            prefetch,
            largest_output,
            machine,
        };
        // Reduce, re-time, choose again: two rounds.
        let mut current = graph.clone();
        for _ in 0..2 {
            let timing = analyse(&current).unwrap();
            let params = Params::method(th_tts as f64, 0, Some(keep));
            let swaps = group_candidates(&candidates(&current, &timing, &params));
            let swaps: Vec<_> = swaps
                .into_iter()
                .filter(|s| !memplan_swap::rewrite::is_reduced(&current, s.value))
                .filter(|s| {
                    !reduction.recompute
                        || memplan_swap::rewrite::recomputable(&current, s.value).is_ok()
                })
                .collect();
            let out = rewrite(&current, &swaps, &options).unwrap();
            valid(&out.graph, &machine)?;
            // Late restores keep every invariant and every node, and the simulator stays
            // consistent on the result.
            let late = retime_restores(&out.graph, &machine).unwrap();
            valid(&late, &machine)?;
            prop_assert_eq!(late.nodes().len(), out.graph.nodes().len());
            current = out.graph;
        }
    }

    /// `unserialized` only adds graphs to the search (the serialized grid and greedy
    /// rounds run as without it), so its result is never worse under the goal.
    #[test]
    fn unserialized_never_hurts(layers in layers(), gbps in 1u32..40) {
        let text = profile_text(&layers);
        let graph = training_step(&parse(&text, "random").unwrap()).unwrap().graph;
        let machine = Machine::link(gbps as f64 * 1e3);
        let setup = Setup {
            machine,
            reduction: Reduction::SWAP,
            goal: Goal::MaxOverhead(0.05),
            th_tts_ms: None,
            th_size_bytes: None,
            max_count: None,
        };
        let without = Improvements {
            retime_restores: false,
            unserialized: false,
            ..Improvements::ALL
        };
        let with = Improvements {
            unserialized: true,
            ..without
        };
        let a = plan(&graph, Planner::Method(without), &setup).unwrap();
        let b = plan(&graph, Planner::Method(with), &setup).unwrap();
        valid(&b.graph, &machine)?;
        prop_assert!(a.met && b.met);
        prop_assert!(b.run.peak_bytes <= a.run.peak_bytes);
        prop_assert!(b.evaluated >= a.evaluated);
    }

    #[test]
    fn planners_meet_the_overhead(layers in layers(), gbps in 1u32..40, reduction in reduction()) {
        let text = profile_text(&layers);
        let graph = training_step(&parse(&text, "random").unwrap()).unwrap().graph;
        let machine = Machine::link(gbps as f64 * 1e3);
        let base = simulate(&graph, &machine).unwrap();
        for planner in [Planner::Method(Improvements::ALL), Planner::Method(Improvements::NONE), Planner::Lms, Planner::Everything] {
            let setup = Setup {
                machine,
                reduction,
                goal: Goal::MaxOverhead(0.05),
                th_tts_ms: None,
                th_size_bytes: None,
                max_count: None,
            };
            let out = plan(&graph, planner, &setup).unwrap();
            valid(&out.graph, &machine)?;
            prop_assert!(out.met);
            prop_assert!(out.run.step_ms <= base.step_ms * 1.05 + 1e-9);
            prop_assert!(out.run.peak_bytes <= base.peak_bytes);
            prop_assert_eq!(simulate(&out.graph, &machine).unwrap(), out.run);
        }
    }
}

/// Greedy rounds batch their tensors in graphs of 1,024 nodes or more: a chain of 520
/// layers (1,041 nodes) planned with every improvement gives a valid graph that meets
/// the overhead and lowers the peak.
#[test]
fn batched_greedy_rounds_on_a_long_chain_are_valid() {
    let layers: Vec<Layer> = (0..520)
        .map(|i| (1, 2, 1 + (i % 4) * 500, false, Vec::new()))
        .collect();
    let graph = training_step(&parse(&profile_text(&layers), "chain").unwrap())
        .unwrap()
        .graph;
    assert!(graph.nodes().len() >= 1024);
    let machine = Machine::link(12e6);
    let base = simulate(&graph, &machine).unwrap();
    let setup = Setup {
        machine,
        reduction: Reduction::SWAP,
        goal: Goal::MaxOverhead(0.05),
        th_tts_ms: None,
        th_size_bytes: None,
        max_count: None,
    };
    let out = plan(&graph, Planner::Method(Improvements::ALL), &setup).unwrap();
    valid(&out.graph, &machine).unwrap();
    assert!(out.met);
    assert!(
        out.run.peak_bytes < base.peak_bytes / 2,
        "{} of {}",
        out.run.peak_bytes,
        base.peak_bytes
    );
    assert_eq!(simulate(&out.graph, &machine).unwrap(), out.run);
}
