//! The every-order mode with aliasing and in-place on (the defaults users get): plans are
//! *executed* in every topological order (all of them for small graphs) by a byte-level
//! simulation of the arena, and the checker's every-order check is held to the same
//! verdict, independently of the analysis that formed the blocks.

use std::collections::BTreeMap;

use memplan::checker::{check, check_all_orders};
use memplan::orders::unordered_pairs;
use memplan::planner::{Exclusive, Planner};
use memplan::{Plan, Problem};
use memplan_graph::{
    all_orders_problem, analyse, analyse_every_order, dataflow, tensor_dataflow, AllOrdersError,
    Analysis, DType, Graph, NodeId, Options, Order, Value, ValueId, ValueKind,
};

struct Rng(u64);

impl Rng {
    fn below(&mut self, bound: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % bound as u64) as usize
    }
}

/// A random graph of `Conv` (one or two inputs, a new size), `Relu` and `Add` (elementwise:
/// in place where the analysis allows) and `Reshape` (a view): graph input `x`, node `i`
/// writes `v{i}`; values nobody reads are graph outputs.
fn random_graph(rng: &mut Rng, most: usize) -> Graph {
    let mut g = Graph::new("random");
    let sizes = [32u64, 64];
    let x = g
        .add_value(Value::with_bytes(
            "x",
            DType::Float,
            sizes[rng.below(2)],
            ValueKind::Activation,
        ))
        .unwrap();
    let mut values = vec![x];
    let n = 2 + rng.below(most - 1);
    for i in 0..n {
        let pick = |rng: &mut Rng| values[rng.below(values.len())];
        let (op, inputs, bytes) = match rng.below(4) {
            0 => {
                let mut ins = vec![pick(rng)];
                if rng.below(2) == 0 {
                    ins.push(pick(rng));
                }
                ("Conv", ins, sizes[rng.below(2)])
            }
            1 => {
                let a = pick(rng);
                ("Relu", vec![a], g.value(a).bytes)
            }
            2 => {
                let (a, b) = (pick(rng), pick(rng));
                ("Add", vec![a, b], g.value(a).bytes)
            }
            _ => {
                let a = pick(rng);
                ("Reshape", vec![a], g.value(a).bytes)
            }
        };
        let v = g
            .add_value(Value::with_bytes(
                format!("v{i}"),
                DType::Float,
                bytes,
                ValueKind::Activation,
            ))
            .unwrap();
        g.add_node(
            format!("n{i}"),
            op,
            inputs.into_iter().map(Some).collect(),
            vec![v],
            BTreeMap::new(),
        )
        .unwrap();
        values.push(v);
    }
    g.set_inputs(vec![x]).unwrap();
    let outputs: Vec<ValueId> = values
        .iter()
        .copied()
        .filter(|&v| g.value(v).consumers.is_empty())
        .collect();
    g.set_outputs(outputs).unwrap();
    g
}

/// Every topological order of `g`'s nodes, up to `cap` of them.
fn all_orders(g: &Graph, cap: usize) -> Vec<Vec<NodeId>> {
    let n = g.nodes().len();
    let mut waiting = vec![0usize; n];
    let mut successors = vec![Vec::new(); n];
    for (i, node) in g.nodes().iter().enumerate() {
        for &out in &node.outputs {
            for &(c, _) in &g.value(out).consumers {
                successors[i].push(c.index());
                waiting[c.index()] += 1;
            }
        }
    }
    fn go(
        prefix: &mut Vec<usize>,
        waiting: &mut [usize],
        successors: &[Vec<usize>],
        done: &mut [bool],
        out: &mut Vec<Vec<NodeId>>,
        cap: usize,
    ) {
        if out.len() >= cap {
            return;
        }
        if prefix.len() == waiting.len() {
            out.push(prefix.iter().map(|&i| NodeId(i as u32)).collect());
            return;
        }
        for i in 0..waiting.len() {
            if done[i] || waiting[i] > 0 {
                continue;
            }
            done[i] = true;
            prefix.push(i);
            for &s in &successors[i] {
                waiting[s] -= 1;
            }
            go(prefix, waiting, successors, done, out, cap);
            for &s in &successors[i] {
                waiting[s] += 1;
            }
            prefix.pop();
            done[i] = false;
        }
    }
    let mut out = Vec::new();
    go(
        &mut Vec::new(),
        &mut waiting,
        &successors,
        &mut vec![false; n],
        &mut out,
        cap,
    );
    out
}

/// Runs `g` in `order` on a byte-level model of the arena where every tensor sits on the
/// pieces of its block in `plan`: each byte remembers which data it holds; a node first
/// checks that every input still holds its data, then writes its output (a view writes
/// its input's data, and only an elementwise node may write over one of its own inputs,
/// and then exactly on it); at the end every graph output must hold its data.
fn execute(g: &Graph, analysis: &Analysis, plan: &Plan, order: &[NodeId]) -> Result<(), String> {
    let pieces = |v: ValueId| -> Vec<(u64, u64)> {
        let info = &analysis.values[v.index()];
        match info.buffer {
            Some(block) => plan
                .extents_of(block, g.value(v).bytes)
                .iter()
                .map(|e| (e.offset, e.offset + e.len))
                .collect(),
            None => Vec::new(),
        }
    };
    let arena = plan
        .extents
        .iter()
        .flatten()
        .flatten()
        .map(|e| e.offset + e.len)
        .chain(
            analysis
                .problem
                .buffers()
                .iter()
                .zip(&plan.offsets)
                .map(|(b, o)| o + b.size),
        )
        .max()
        .unwrap_or(0);
    let mut memory = vec![0u32; arena as usize];
    let mut data = vec![0u32; g.values().len()];
    let write = |memory: &mut [u32], v: ValueId, tag: u32| {
        for (s, e) in pieces(v) {
            memory[s as usize..e as usize]
                .iter_mut()
                .for_each(|b| *b = tag);
        }
    };
    let holds = |memory: &[u32], v: ValueId, tag: u32| {
        pieces(v)
            .iter()
            .all(|&(s, e)| memory[s as usize..e as usize].iter().all(|&b| b == tag))
    };
    for &x in g.inputs() {
        data[x.index()] = x.0 + 1;
        write(&mut memory, x, x.0 + 1);
    }
    for &node_id in order {
        let node = g.node(node_id);
        for &x in node.inputs.iter().flatten() {
            if !holds(&memory, x, data[x.index()]) {
                return Err(format!(
                    "node {} reads '{}', whose bytes were overwritten",
                    node.name,
                    g.value(x).name
                ));
            }
        }
        let y = node.outputs[0];
        let is_view = node.op_type == "Reshape";
        let elementwise = node.op_type == "Relu" || node.op_type == "Add";
        for &x in node.inputs.iter().flatten() {
            let (px, py) = (pieces(x), pieces(y));
            let overlaps = px
                .iter()
                .any(|&(s, e)| py.iter().any(|&(t, f)| s < f && t < e));
            if overlaps && !((is_view || elementwise) && px == py) {
                return Err(format!(
                    "node {} writes '{}' over its input '{}' without being able to",
                    node.name,
                    g.value(y).name,
                    g.value(x).name
                ));
            }
        }
        data[y.index()] = if is_view {
            data[node.inputs[0].unwrap().index()]
        } else {
            y.0 + 1
        };
        write(&mut memory, y, data[y.index()]);
    }
    for &y in g.outputs() {
        if !holds(&memory, y, data[y.index()]) {
            return Err(format!(
                "graph output '{}' was overwritten",
                g.value(y).name
            ));
        }
    }
    Ok(())
}

/// What the every-order check says of a block plan, tensor by tensor.
fn tensor_check(g: &Graph, analysis: &Analysis, plan: &Plan) -> Vec<(String, String)> {
    let (problem, tensor_plan, flow) = tensor_dataflow(g, analysis, plan).unwrap();
    check_all_orders(&problem, &tensor_plan, &flow)
        .unwrap()
        .into_iter()
        .map(|u| (u.a, u.b))
        .collect()
}

/// The problem the every-order mode built before it was made sound: pairs unordered at
/// the level of the analysis' blocks, whatever order the in-place writes were decided
/// for.
fn blocks_only_problem(g: &Graph, analysis: &Analysis) -> Problem {
    let pairs = unordered_pairs(&analysis.problem, &dataflow(g, analysis)).unwrap();
    let buffers = analysis
        .problem
        .buffers()
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let mut b = b.clone();
            b.lifetime = memplan::Lifetime {
                start: i as u64,
                end: i as u64 + 1,
            };
            b.gaps.clear();
            b
        })
        .collect();
    Problem::new(buffers, pairs).unwrap()
}

/// Random DAGs with aliasing and in-place on: every plan of the every-order mode (both
/// layouts) passes the ordinary check and the every-order check, and runs correctly in
/// every topological order (all of them up to 400 per graph, else the first 400 found).
#[test]
fn every_order_plans_run_in_every_order_with_inplace_and_aliasing_on() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut inplace, mut views, mut orders, mut shared) = (0, 0, 0, 0);
    for round in 0..300 {
        let g = random_graph(&mut rng, 9);
        let analysis = analyse_every_order(&g, Order::File, Options::default()).unwrap();
        inplace += analysis.stats.inplace_saved_bytes.min(1);
        views += analysis.stats.alias_saved_bytes.min(1);
        let problem = all_orders_problem(&g, &analysis).unwrap();
        let every = all_orders(&g, 400);
        for planner in [&Exclusive::DEFAULT, &Exclusive::FRAGMENTED] {
            let plan = planner.plan(&problem).unwrap();
            let report = check(&problem, &plan);
            assert!(report.is_valid(), "round {round}: {:?}", report.violations);
            assert!(check(&analysis.problem, &plan).is_valid(), "round {round}");
            let blocks = check_all_orders(&analysis.problem, &plan, &dataflow(&g, &analysis));
            assert!(blocks.unwrap().is_empty(), "round {round}");
            let tensors = tensor_check(&g, &analysis, &plan);
            assert!(tensors.is_empty(), "round {round}: {tensors:?}");
            shared += usize::from(plan.arena_bytes.unwrap() < problem.total_size().unwrap());
            for order in &every {
                orders += 1;
                if let Err(e) = execute(&g, &analysis, &plan, order) {
                    panic!("round {round}, {planner:?}, order {order:?}: {e}");
                }
            }
        }
    }
    // The test exercises what it claims to.
    assert!(inplace > 30, "only {inplace} graphs wrote in place");
    assert!(views > 30, "only {views} graphs had views");
    assert!(shared > 100, "only {shared} plans share bytes");
    assert!(orders > 5000, "only {orders} orders executed");
}

/// The block-level construction that trusted in-place writes decided for the file order
/// makes plans that break in some order; the tensor-level every-order check flags exactly
/// the plans that break (it never passes a plan that a run breaks, and it never flags a
/// plan that every order runs).
#[test]
fn the_tensor_check_catches_every_plan_that_breaks_in_some_order() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let (mut broken, mut fine) = (0, 0);
    for round in 0..3000 {
        let g = random_graph(&mut rng, 6);
        let analysis = analyse(&g, Order::File, Options::default()).unwrap();
        let problem = blocks_only_problem(&g, &analysis);
        let plan = Exclusive::DEFAULT.plan(&problem).unwrap();
        assert!(check(&problem, &plan).is_valid());
        let every = all_orders(&g, 1000);
        assert!(every.len() < 1000, "round {round}: every order must be run");
        let runs_everywhere = every
            .iter()
            .all(|order| execute(&g, &analysis, &plan, order).is_ok());
        let flagged = tensor_check(&g, &analysis, &plan);
        assert_eq!(
            runs_everywhere,
            flagged.is_empty(),
            "round {round}: runs in every order: {runs_everywhere}, flagged: {flagged:?}"
        );
        if runs_everywhere {
            fine += 1;
        } else {
            broken += 1;
        }
    }
    assert!(
        broken > 30,
        "only {broken} broken plans: the test shows nothing"
    );
    assert!(fine > 10, "only {fine} sound plans");
}

/// The counterexample: `a` is read by `B` and by `C = Relu(a)`; in the file order A, B,
/// C, D the analysis writes `c` over `a`, which breaks in the order A, C, B, D.
#[test]
fn relu_over_an_input_another_branch_still_reads_is_not_shared_in_every_order() {
    let mut g = Graph::new("counterexample");
    let value = |g: &mut Graph, name: &str| {
        g.add_value(Value::with_bytes(
            name,
            DType::Float,
            64,
            ValueKind::Activation,
        ))
        .unwrap()
    };
    let x = value(&mut g, "x");
    let a = value(&mut g, "a");
    let b = value(&mut g, "b");
    let c = value(&mut g, "c");
    let d = value(&mut g, "d");
    let node = |g: &mut Graph, name: &str, op: &str, ins: &[ValueId], out: ValueId| {
        g.add_node(
            name,
            op,
            ins.iter().map(|&v| Some(v)).collect(),
            vec![out],
            BTreeMap::new(),
        )
        .unwrap();
    };
    node(&mut g, "A", "Conv", &[x], a);
    node(&mut g, "B", "Conv", &[a], b);
    node(&mut g, "C", "Relu", &[a], c);
    node(&mut g, "D", "Conv", &[b, c], d);
    g.set_inputs(vec![x]).unwrap();
    g.set_outputs(vec![d]).unwrap();

    // For the file order alone, c is written over a.
    let one = analyse(&g, Order::File, Options::default()).unwrap();
    assert_eq!(one.values[c.index()].inplace_of, Some(a));
    // The every-order mode refuses that analysis ...
    assert!(matches!(
        all_orders_problem(&g, &one),
        Err(AllOrdersError::OneOrderInplace { inplace: 1 })
    ));
    // ... and the block-level problem it used to build shares a and c, which the run in
    // the order A, C, B, D breaks and the tensor check flags.
    let unsound = Exclusive::DEFAULT
        .plan(&blocks_only_problem(&g, &one))
        .unwrap();
    let reordered = [0, 2, 1, 3].map(NodeId);
    assert!(execute(&g, &one, &unsound, &[0, 1, 2, 3].map(NodeId)).is_ok());
    let err = execute(&g, &one, &unsound, &reordered).unwrap_err();
    assert!(err.contains("node B reads 'a'"), "{err}");
    assert_eq!(
        tensor_check(&g, &one, &unsound),
        vec![("a".to_string(), "c".to_string())]
    );

    // The every-order analysis keeps c apart; its plan runs in both orders and passes.
    let every = analyse_every_order(&g, Order::File, Options::default()).unwrap();
    assert_eq!(every.values[c.index()].inplace_of, None);
    let problem = all_orders_problem(&g, &every).unwrap();
    let plan = Exclusive::DEFAULT.plan(&problem).unwrap();
    assert!(check(&problem, &plan).is_valid());
    assert!(tensor_check(&g, &every, &plan).is_empty());
    for order in all_orders(&g, 10) {
        execute(&g, &every, &plan, &order).unwrap();
    }
    // With B ordered before C (a control edge), writing c over a is safe in every order.
    g.add_control_edge(NodeId(1), NodeId(2)).unwrap();
    let ordered = analyse_every_order(&g, Order::File, Options::default()).unwrap();
    assert_eq!(ordered.values[c.index()].inplace_of, Some(a));
}

/// The output-sensitive pair listing equals the quadratic definition, on the blocks of
/// both analyses and on the tensors (graphs with several sources: `x` and a second input).
#[test]
fn unordered_pairs_match_their_definition() {
    let mut rng = Rng(0x51_7cc1_b727_220a);
    for round in 0..500 {
        let g = random_graph(&mut rng, 12);
        for analysis in [
            analyse(&g, Order::File, Options::default()).unwrap(),
            analyse_every_order(&g, Order::File, Options::default()).unwrap(),
            analyse(&g, Order::File, Options::NONE).unwrap(),
        ] {
            let flow = dataflow(&g, &analysis);
            assert_eq!(
                unordered_pairs(&analysis.problem, &flow).unwrap(),
                memplan::orders::unordered_pairs_naive(&analysis.problem, &flow).unwrap(),
                "round {round}"
            );
            let offsets = vec![0; analysis.problem.len()];
            let plan = Plan::new(&analysis.problem, offsets).unwrap();
            let (problem, _, flow) = tensor_dataflow(&g, &analysis, &plan).unwrap();
            assert_eq!(
                unordered_pairs(&problem, &flow).unwrap(),
                memplan::orders::unordered_pairs_naive(&problem, &flow).unwrap(),
                "round {round}, tensors"
            );
        }
    }
}
