//! The `npu` method on graphs: platform files, operator configuration, the three groups, both
//! matching rules, and random graphs whose every plan is checked.

use std::collections::BTreeMap;

use memplan::checker;
use memplan::planner::npu::{Layout, Match, Slack};
use memplan::BufferId;
use memplan_graph::{
    analyse, analyse_for, npu_groups, operator_configs, plan_npu, read_graph_json,
    AcceleratorBuffers, DType, Graph, NpuPlan, OpGroup, Options, Order, Platform, PlatformError,
    Role, Value, ValueId, ValueKind, WeightLifetime,
};
use proptest::prelude::*;

/// A chain `x -> n1 -> ... -> y`: `ops[i]` makes the value named `names[i + 1]` of
/// `bytes[i + 1]` bytes from the previous one; `x` is the input, the last one the output.
fn chain(ops: &[&str], names: &[&str], bytes: &[u64]) -> Graph {
    let mut g = Graph::new("chain");
    let ids: Vec<ValueId> = names
        .iter()
        .zip(bytes)
        .enumerate()
        .map(|(i, (&n, &b))| {
            let kind = if i == 0 {
                ValueKind::Input
            } else {
                ValueKind::Activation
            };
            g.add_value(Value::with_bytes(n, DType::Float, b, kind))
                .unwrap()
        })
        .collect();
    for (i, op) in ops.iter().enumerate() {
        g.add_node(
            format!("n{}", i + 1),
            *op,
            vec![Some(ids[i])],
            vec![ids[i + 1]],
            BTreeMap::new(),
        )
        .unwrap();
    }
    g.set_inputs(vec![ids[0]]).unwrap();
    g.set_outputs(vec![*ids.last().unwrap()]).unwrap();
    g
}

fn platform(text: &str) -> Platform {
    Platform::parse(text, "test.json").unwrap()
}

/// Plans (the source's unbounded size match, objects end to end, so that the arenas below
/// are sums of objects computed by hand) and checks the plan against the aligned problem
/// and the analysis' own problem.
fn checked(g: &Graph, p: &Platform, rule: Match) -> (memplan_graph::Analysis, NpuPlan) {
    let analysis = analyse_for(g, Order::File, Options::default(), p).unwrap();
    let npu = plan_npu(g, &analysis, p, rule, Slack::Any, Layout::EndToEnd, 1).unwrap();
    for problem in [&npu.problem, &analysis.problem] {
        let report = checker::check(problem, &npu.assignment.plan);
        assert!(report.is_valid(), "{:?}", report.violations);
    }
    (analysis, npu)
}

fn block(g: &Graph, a: &memplan_graph::Analysis, name: &str) -> BufferId {
    a.values[g.value_by_name(name).unwrap().index()]
        .buffer
        .unwrap()
}

/// x -MatMul-> m -Transpose-> t -Relu-> r -Softmax-> q -MatMul-> y, 64 bytes each. Relu
/// writes r over t (t dies there): blocks x [0,2), m [1,3), t={t,r} [2,5), q [4,6),
/// y [5,6).
fn transformer_like() -> Graph {
    chain(
        &["MatMul", "Transpose", "Relu", "Softmax", "MatMul"],
        &["x", "m", "t", "r", "q", "y"],
        &[64; 6],
    )
}

#[test]
fn groups_come_from_the_platform_and_in_place_reuses_the_input_block() {
    let g = transformer_like();
    let p = platform(
        r#"{"accelerated": ["MatMul"], "in_place": ["Relu"], "accelerator_buffers": "dedicated"}"#,
    );
    let (a, npu) = checked(&g, &p, Match::Size);
    let b = |n| block(&g, &a, n);
    assert_eq!(b("r"), b("t"), "r is written over t");
    let groups: Vec<OpGroup> = npu.configs.iter().map(|c| c.group).collect();
    use OpGroup::*;
    assert_eq!(groups, [Accelerated, Other, InPlace, Other, Accelerated]);
    let widths: Vec<u64> = npu.configs.iter().map(|c| c.width).collect();
    assert_eq!(widths, [128, 128, 64, 128, 128]);
    assert_eq!(npu.configs[2].present, vec![b("t")]);
    let groups = npu_groups(&g, &a, &npu.configs, &p);
    assert_eq!(groups.dedicated, [b("x"), b("m"), b("q"), b("y")]);
    assert_eq!(groups.early, [b("t")]);
    assert_eq!(groups.steps, [2, 4]);
    // Group 1: four dedicated objects; group 2: t's block finds no shareable object.
    let objects: Vec<_> = npu
        .assignment
        .objects
        .iter()
        .map(|o| o.members.clone())
        .collect();
    assert_eq!(objects, [[b("x")], [b("m")], [b("q")], [b("y")], [b("t")]]);
    assert_eq!(npu.assignment.stats.dedicated_buffers, 4);
    assert_eq!(npu.assignment.stats.new_pool_bytes, 320);
    assert_eq!(npu.assignment.plan.arena_bytes, Some(320));

    // Letting later tensors reuse the accelerator's objects: t's block [2,5) fits x's
    // object (x [0,2) is over; y [5,6) would fit too, x's has the lower index).
    let reusable = platform(
        r#"{"accelerated": ["MatMul"], "in_place": ["Relu"], "accelerator_buffers": "reusable"}"#,
    );
    for rule in [Match::Size, Match::Lifetime] {
        let (_, npu) = checked(&g, &reusable, rule);
        assert_eq!(npu.assignment.objects[0].members, [b("x"), b("t")]);
        assert_eq!(npu.assignment.plan.arena_bytes, Some(256));
        assert_eq!(npu.assignment.stats.reused_bytes, 64);
    }
    // Pooled: group 1 goes through the pool too, first: x -> 0, m -> 1 (x live); q [4,6)
    // may join both (same size): m's usage period ends closer in time (step 3, gap 1;
    // x's at 2, gap 2), so q -> 1; y [5,6) -> 0 (1 busy with q); then t [2,5) fits 0
    // (x [0,2) and y [5,6) leave [2,5) free).
    let pooled = platform(
        r#"{"accelerated": ["MatMul"], "in_place": ["Relu"], "accelerator_buffers": "pooled"}"#,
    );
    let (_, npu) = checked(&g, &pooled, Match::Size);
    let objects: Vec<_> = npu
        .assignment
        .objects
        .iter()
        .map(|o| o.members.clone())
        .collect();
    assert_eq!(
        objects,
        [vec![b("x"), b("y"), b("t")], vec![b("m"), b("q")]]
    );
    assert_eq!(npu.assignment.stats.dedicated_buffers, 0);
    assert_eq!(npu.assignment.plan.arena_bytes, Some(128));
}

#[test]
fn in_place_follows_the_platform_list() {
    let g = transformer_like();
    let none = platform(r#"{"accelerated": ["MatMul"], "in_place": []}"#);
    let (a, npu) = checked(&g, &none, Match::Size);
    assert_ne!(block(&g, &a, "r"), block(&g, &a, "t"));
    assert_eq!(npu.configs[2].group, OpGroup::Other);
    // The default profile runs exactly the analysis' in-place operators: same problem.
    let default = Platform::default_profile();
    let ours = analyse_for(&g, Order::File, Options::default(), &default).unwrap();
    let theirs = analyse(&g, Order::File, Options::default()).unwrap();
    assert_eq!(ours.problem, theirs.problem);
}

/// A chain without accelerated or in-place operators: x 8 [0,2), a 40 [1,3), b 16 [2,4),
/// c 8 [3,5), d 24 [4,6), y 8 [5,6). Widths by step: 48, 56, 24, 32, 32, so the order is
/// steps 2, 1, 4, 5, 3.
///
/// step 2: a -> object 0 (40), b -> object 1 (16). step 1: x -> object 1 (free, closest).
/// step 4: d (24): size match takes object 0 (40 ≥ 24); lifetime match takes object 1
/// (b ends at 4 where d starts: gap 0, against a's gap 1) and grows it to 24. c (8):
/// size match finds object 0 busy (d) and object 1 busy (b): a new object 2; lifetime
/// match takes object 0 (a ended at 3 = c's start). step 5: y -> object 2 (size, exact
/// fit) or object 0 (lifetime, c ends at 5).
#[test]
fn size_match_and_lifetime_match_pick_different_buffers() {
    let g = chain(
        &["Softmax"; 5],
        &["x", "a", "b", "c", "d", "y"],
        &[8, 40, 16, 8, 24, 8],
    );
    let p = platform("{}");
    let (a, size) = checked(&g, &p, Match::Size);
    let (_, life) = checked(&g, &p, Match::Lifetime);
    let b = |n| block(&g, &a, n);
    let object_of = |npu: &NpuPlan, n| npu.assignment.object_of[b(n).index()].unwrap();
    let by_size: Vec<usize> = ["x", "a", "b", "c", "d", "y"]
        .iter()
        .map(|n| object_of(&size, n))
        .collect();
    assert_eq!(by_size, [1, 0, 1, 2, 0, 2]);
    let by_life: Vec<usize> = ["x", "a", "b", "c", "d", "y"]
        .iter()
        .map(|n| object_of(&life, n))
        .collect();
    assert_eq!(by_life, [1, 0, 1, 0, 1, 0]);
    assert_eq!(size.assignment.plan.arena_bytes, Some(64));
    assert_eq!(life.assignment.plan.arena_bytes, Some(64));
    assert_eq!(life.assignment.stats.grown_bytes, 8);
    assert_eq!(a.stats.max_live_bytes, 56);
}

#[test]
fn the_default_profile_parses_and_aligns() {
    let p = Platform::default_profile();
    assert_eq!(p.name, "default-npu");
    assert_eq!(p.alignment, 64);
    assert!(p.accelerated.iter().any(|o| o == "Conv"));
    // the `npu` method (corrected): group 1's buffers are the pool groups 2 and 3 search.
    assert_eq!(p.accelerator_buffers, AcceleratorBuffers::Pooled);
    let unset = platform(r#"{"accelerated": ["MatMul"]}"#);
    assert_eq!(unset.accelerator_buffers, AcceleratorBuffers::Pooled);
    // Exactly the analysis' in-place operators: the default problem is everyone's.
    assert_eq!(p.in_place, memplan_graph::analysis::INPLACE_OPS);
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../platforms/");
    let pooled = std::fs::read_to_string(format!("{root}npu-pooled.json")).unwrap();
    let pooled = Platform::parse(&pooled, "npu-pooled.json").unwrap();
    assert_eq!(pooled.accelerator_buffers, AcceleratorBuffers::Pooled);
    assert!(!p.plan_weights && !pooled.plan_weights);
    // npu-weights.json: the default profile that also plans the accelerators' weights.
    let weights = std::fs::read_to_string(format!("{root}npu-weights.json")).unwrap();
    let weights = Platform::parse(&weights, "npu-weights.json").unwrap();
    assert!(weights.plan_weights);
    assert_eq!(weights.weight_lifetime, WeightLifetime::Uses);
    assert_eq!(
        (&weights.accelerated, &weights.in_place, weights.alignment),
        (&p.accelerated, &p.in_place, p.alignment)
    );
    assert_eq!(
        std::fs::read_to_string(format!("{root}default-npu.json")).unwrap(),
        memplan_graph::npu::DEFAULT_PLATFORM_JSON
    );
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/small_cnn.json"
    ))
    .unwrap();
    let g = read_graph_json(&text, "small_cnn.json").unwrap();
    for rule in [Match::Size, Match::Lifetime] {
        let (_, npu) = checked(&g, &p, rule);
        assert!(npu.assignment.plan.offsets.iter().all(|o| o % 64 == 0));
    }
}

#[test]
fn bad_platform_files_are_clear_errors() {
    let err = |text: &str| Platform::parse(text, "my.json").unwrap_err();
    let e = err(r#"{"acelerated": ["Conv"]}"#);
    assert!(matches!(e, PlatformError::UnknownKey { .. }));
    let text = e.to_string();
    assert!(
        text.contains("my.json") && text.contains("acelerated"),
        "{text}"
    );
    let e = err(r#"{"accelerated": ["Conv", "conv"]}"#).to_string();
    assert!(
        e.contains("my.json") && e.contains("'accelerated'") && e.contains("entry 1: 'conv'"),
        "{e}"
    );
    let e = err(r#"{"in_place": ["Conv"]}"#).to_string();
    assert!(
        e.contains("'in_place'") && e.contains("'Conv'") && e.contains("Relu"),
        "{e}"
    );
    let e = err(r#"{"alignment": 0}"#).to_string();
    assert!(e.contains("my.json") && e.contains("'alignment'"), "{e}");
    let e = err(r#"{"alignment": -4}"#).to_string();
    assert!(e.contains("my.json") && e.contains("'alignment'"), "{e}");
    // Wrong types name the file and the key.
    let e = err(r#"{"plan_weights": "yes"}"#).to_string();
    assert!(
        e.contains("my.json") && e.contains("'plan_weights'") && e.contains("true or false"),
        "{e}"
    );
    let e = err(r#"{"weight_lifetime": "always"}"#).to_string();
    assert!(
        e.contains("my.json") && e.contains("'weight_lifetime'") && e.contains("\"run\""),
        "{e}"
    );
    let e = err(r#"{"accelerated": "Conv"}"#).to_string();
    assert!(e.contains("my.json") && e.contains("'accelerated'"), "{e}");
    let e = err(r#"{"name": 3}"#).to_string();
    assert!(e.contains("my.json") && e.contains("'name'"), "{e}");
    let e = err(r#"["Conv"]"#).to_string();
    assert!(e.contains("my.json") && e.contains("JSON object"), "{e}");
    let e = err("{").to_string();
    assert!(e.contains("my.json"), "{e}");
}

const OPS: &[&str] = &["Relu", "Add", "Reshape", "Conv", "MatMul", "Softmax", "Mul"];

/// One node per entry: `(op index, size class, input picks, is graph output)`, as in
/// random_graphs.rs: node `i` reads the input, a weight or earlier outputs.
type Spec = Vec<(usize, u64, Vec<usize>, bool)>;

fn spec() -> impl Strategy<Value = Spec> {
    prop::collection::vec(
        (
            0..OPS.len(),
            1u64..5,
            prop::collection::vec(any::<usize>(), 1..4),
            prop::bool::weighted(0.2),
        ),
        0..24,
    )
}

fn build(spec: &Spec) -> Graph {
    let mut g = Graph::new("random");
    let x = g
        .add_value(Value::with_bytes("x", DType::Float, 16, ValueKind::Input))
        .unwrap();
    let w = g
        .add_value(Value::with_bytes("w", DType::Float, 8, ValueKind::Weight))
        .unwrap();
    let mut available = vec![x, w];
    let mut outputs = Vec::new();
    for (i, (op, size, picks, is_output)) in spec.iter().enumerate() {
        let out = g
            .add_value(Value::with_bytes(
                format!("v{i}"),
                DType::Float,
                size * 8,
                ValueKind::Activation,
            ))
            .unwrap();
        let inputs = picks
            .iter()
            .map(|p| Some(available[p % available.len()]))
            .collect();
        g.add_node(
            format!("n{i}"),
            OPS[*op],
            inputs,
            vec![out],
            BTreeMap::new(),
        )
        .unwrap();
        available.push(out);
        if *is_output {
            outputs.push(out);
        }
    }
    g.set_inputs(vec![x]).unwrap();
    g.set_outputs(outputs).unwrap();
    g
}

fn platforms() -> impl Strategy<Value = Platform> {
    (
        prop::sample::subsequence(vec!["Conv", "MatMul", "Add", "Softmax"], 0..4),
        prop::sample::subsequence(vec!["Relu", "Add", "Mul"], 0..3),
        prop::sample::select(vec![1u64, 4, 64]),
        prop::sample::select(vec![
            AcceleratorBuffers::Dedicated,
            AcceleratorBuffers::Reusable,
            AcceleratorBuffers::Pooled,
        ]),
        any::<bool>(),
        prop::sample::select(vec![WeightLifetime::Uses, WeightLifetime::Run]),
    )
        .prop_map(
            |(
                accelerated,
                in_place,
                alignment,
                accelerator_buffers,
                plan_weights,
                weight_lifetime,
            )| Platform {
                name: "random".into(),
                accelerated: accelerated.into_iter().map(String::from).collect(),
                in_place: in_place.into_iter().map(String::from).collect(),
                alignment,
                accelerator_buffers,
                plan_weights,
                weight_lifetime,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_npu_plan_is_valid(
        spec in spec(),
        p in platforms(),
        rule in prop::sample::select(vec![Match::Exact, Match::Size, Match::Lifetime]),
        end_to_end in any::<bool>(),
        slack in prop::sample::select(vec![Slack::Percent(0), Slack::Percent(50), Slack::Any]),
    ) {
        let g = build(&spec);
        let layout = if end_to_end { Layout::EndToEnd } else { Layout::Offsets };
        let analysis = analyse_for(&g, Order::File, Options::default(), &p).unwrap();
        let npu = plan_npu(&g, &analysis, &p, rule, slack, layout, 1).unwrap();
        let plan = &npu.assignment.plan;
        for problem in [&npu.problem, &analysis.problem] {
            let report = checker::check(problem, plan);
            prop_assert!(report.is_valid(), "{:?}", report.violations);
        }
        prop_assert!(plan.offsets.iter().all(|o| o % p.alignment == 0));
        let arena = plan.arena_bytes.unwrap();
        prop_assert!(arena >= analysis.stats.max_live_bytes);
        let stats = npu.assignment.stats;
        let sizes: u64 = npu.assignment.objects.iter().map(|o| o.size).sum();
        prop_assert_eq!(stats.new_pool_bytes, sizes);
        // End to end the arena is at least the objects' sizes; by offsets never more than
        // end to end, with the same assignment.
        let other = if end_to_end { Layout::Offsets } else { Layout::EndToEnd };
        let other = plan_npu(&g, &analysis, &p, rule, slack, other, 1).unwrap();
        prop_assert_eq!(&other.assignment.object_of, &npu.assignment.object_of);
        let report = checker::check(&analysis.problem, &other.assignment.plan);
        prop_assert!(report.is_valid(), "{:?}", report.violations);
        let (e2e, offsets) = if end_to_end { (arena, other.assignment.plan.arena_bytes.unwrap()) } else { (other.assignment.plan.arena_bytes.unwrap(), arena) };
        prop_assert!(e2e >= sizes);
        prop_assert!(offsets <= e2e);
        prop_assert_eq!(
            stats.reused_bytes + stats.new_pool_bytes,
            analysis.problem.total_size().unwrap()
        );
        // Every block in exactly one object; group 1's objects alone unless shared.
        let mut seen = vec![0; analysis.problem.len()];
        for (k, object) in npu.assignment.objects.iter().enumerate() {
            for m in &object.members {
                seen[m.index()] += 1;
                prop_assert_eq!(npu.assignment.object_of[m.index()], Some(k));
            }
            if object.dedicated && p.accelerator_buffers == AcceleratorBuffers::Dedicated {
                prop_assert_eq!(object.members.len(), 1);
            }
        }
        prop_assert!(seen.iter().all(|&n| n == 1));
        // Widths are the present blocks' bytes.
        let configs = operator_configs(&g, &analysis, &p).unwrap();
        for c in &configs {
            let sum: u64 = c.present.iter().map(|&b| analysis.problem.buffer(b).size).sum();
            prop_assert_eq!(c.width, sum);
        }
        // Weights: in the problem exactly when the platform plans them and an accelerated
        // operator reads them; the tensors of the plan are every block's values.
        let w = g.value_by_name("w").unwrap();
        let read_by_accelerator = g.value(w).consumers.iter().any(|(n, _)| {
            p.accelerated.iter().any(|a| *a == g.node(*n).op_type)
        });
        let planned = analysis.values[w.index()].buffer;
        prop_assert_eq!(planned.is_some(), p.plan_weights && read_by_accelerator);
        prop_assert_eq!(analysis.values[w.index()].role, Role::Weight);
        if let Some(b) = planned {
            let lifetime = analysis.problem.buffer(b).lifetime;
            if p.weight_lifetime == WeightLifetime::Run {
                prop_assert_eq!((lifetime.start, lifetime.end), (0, analysis.last_step + 1));
            }
            prop_assert!(analysis.tensor_slots(&g).iter().any(|s| s.name == "w" && s.block == b));
        }
        // Deterministic.
        let again = plan_npu(&g, &analysis, &p, rule, slack, layout, 1).unwrap();
        prop_assert_eq!(&again.assignment, &npu.assignment);
    }
}

/// x -Conv(wc)-> c -Relu-> r -Mul(wm)-> m -MatMul(wk, wc)-> y, 64-byte activations; weights
/// wc 32 (read by Conv and MatMul), wm 16 (read by Mul only), wk 48 (read by MatMul).
/// Steps 1..4. With `plan_weights` the accelerated operators' weights wc and wk are
/// planned, wm (read by Mul, not accelerated) is not.
fn weighted() -> Graph {
    let mut g = Graph::new("weighted");
    let value = |g: &mut Graph, n: &str, b: u64, k: ValueKind| {
        g.add_value(Value::with_bytes(n, DType::Float, b, k))
            .unwrap()
    };
    let x = value(&mut g, "x", 64, ValueKind::Input);
    let wc = value(&mut g, "wc", 32, ValueKind::Weight);
    let wm = value(&mut g, "wm", 16, ValueKind::Weight);
    let wk = value(&mut g, "wk", 48, ValueKind::Weight);
    let c = value(&mut g, "c", 64, ValueKind::Activation);
    let r = value(&mut g, "r", 64, ValueKind::Activation);
    let m = value(&mut g, "m", 64, ValueKind::Activation);
    let y = value(&mut g, "y", 64, ValueKind::Activation);
    let node = |g: &mut Graph, n: &str, op: &str, inputs: Vec<ValueId>, out: ValueId| {
        g.add_node(
            n,
            op,
            inputs.into_iter().map(Some).collect(),
            vec![out],
            BTreeMap::new(),
        )
        .unwrap();
    };
    node(&mut g, "conv", "Conv", vec![x, wc], c);
    node(&mut g, "relu", "Relu", vec![c], r);
    node(&mut g, "mul", "Mul", vec![r, wm], m);
    node(&mut g, "mm", "MatMul", vec![m, wk, wc], y);
    g.set_inputs(vec![x]).unwrap();
    g.set_outputs(vec![y]).unwrap();
    g
}

#[test]
fn weights_of_accelerated_operators_are_planned_when_the_platform_says_so() {
    let g = weighted();
    let id = |n: &str| g.value_by_name(n).unwrap();
    // Without the field: activations only (x, c, r, m, y: Relu may not run in place
    // here, the platform lists no in-place operator).
    let off = platform(r#"{"accelerated": ["Conv", "MatMul"]}"#);
    let (a, _) = checked(&g, &off, Match::Size);
    assert_eq!(a.problem.len(), 5);
    assert!(["wc", "wm", "wk"]
        .iter()
        .all(|n| a.values[id(n).index()].buffer.is_none()));

    // Usage periods from the uses: wc read at steps 1 and 4 -> [1, 5); wk at 4 -> [4, 5).
    let uses = platform(r#"{"accelerated": ["Conv", "MatMul"], "plan_weights": true}"#);
    assert_eq!(uses.weight_lifetime, WeightLifetime::Uses);
    let (a, npu) = checked(&g, &uses, Match::Size);
    assert_eq!(a.problem.len(), 7);
    let b = |n: &str| a.values[id(n).index()].buffer;
    assert!(b("wm").is_none(), "wm is read by Mul only");
    let lifetime = |n: &str| {
        let l = a.problem.buffer(b(n).unwrap()).lifetime;
        (l.start, l.end)
    };
    assert_eq!(lifetime("wc"), (1, 5));
    assert_eq!(lifetime("wk"), (4, 5));
    assert_eq!(a.values[id("wc").index()].role, Role::Weight);
    // The max-live bound counts them: step 4 holds m, y, wc, wk = 64 + 64 + 32 + 48.
    assert_eq!(a.stats.max_live_bytes, 208);
    // Both are group 1 (inputs of accelerated operators), in execution order and slots:
    // x, wc, c (conv), then m, wk, wc, y (mm; wc already listed).
    let groups = npu_groups(&g, &a, &npu.configs, &uses);
    let blocks: Vec<BufferId> = ["x", "wc", "c", "m", "wk", "wc", "y"]
        .iter()
        .map(|n| b(n).unwrap())
        .collect();
    assert_eq!(groups.early, blocks);
    // The tensors of the plan include the planned weights, not wm.
    let names: Vec<String> = a.tensor_slots(&g).into_iter().map(|s| s.name).collect();
    assert!(names.contains(&"wc".to_string()) && names.contains(&"wk".to_string()));
    assert!(!names.contains(&"wm".to_string()));
    // Widths: step 1 x, c, wc = 160; step 4 m, y, wc, wk = 208.
    assert_eq!(npu.configs[0].width, 160);
    assert_eq!(npu.configs[3].width, 208);

    // The whole run: [0, 5) for both.
    let run = platform(
        r#"{"accelerated": ["Conv", "MatMul"], "plan_weights": true, "weight_lifetime": "run"}"#,
    );
    let (a, npu) = checked(&g, &run, Match::Lifetime);
    for n in ["wc", "wk"] {
        let l = a
            .problem
            .buffer(a.values[id(n).index()].buffer.unwrap())
            .lifetime;
        assert_eq!((l.start, l.end), (0, 5), "{n}");
    }
    assert!(npu.assignment.plan.arena_bytes.unwrap() >= a.stats.max_live_bytes);

    // A weight read only by a non-accelerated operator stays out, even with the field.
    let only_conv = platform(r#"{"accelerated": ["Conv"], "plan_weights": true}"#);
    let (a, _) = checked(&g, &only_conv, Match::Size);
    assert!(a.values[id("wc").index()].buffer.is_some());
    assert!(a.values[id("wk").index()].buffer.is_none());
    assert!(a.values[id("wm").index()].buffer.is_none());
}
