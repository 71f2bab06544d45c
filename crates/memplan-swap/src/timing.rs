//! Timing analysis (the `swap` method): TAT, TRT and TTS for every node input, in one pass
//! linear in the graph size.
//!
//! # Definitions
//!
//! - TAT (tensor arrival time) of an input: when the tensor it reads is available: the
//!   finish time of its producer, or 0 for a value no node produces (graph input, weight).
//! - TRT (tensor required time) of a node: when it can start, the largest TAT of its
//!   inputs (0 when it has none). Every input of a node has the node's TRT.
//! - TTS (tensor timing slack) of an input: TRT − TAT, how long the tensor waits unused.
//! - The node finishes at TAT(node) = TRT(node) + latency(node).
//!
//! ```text
//!  time(ms)  0    1    2    3    4    5    6
//!  a (2ms)   [====)                            TAT(a) = 2
//!  b (4ms)   [=========)                       TAT(b) = 4
//!  c(a, b)             [=====)                 TRT(c) = max(2, 4) = 4
//!            input a waits 4 − 2 = 2 ms: TTS = 2; input b: TTS = 0
//! ```
//!
//! # The pass
//!
//! As the method states: Q starts with the source nodes; taking q out of Q sets the TAT of
//! each successor input to TAT(q); a node whose inputs all have a TAT gets its TRT, its
//! inputs' TTS and its own TAT, and enters Q. The order nodes leave Q does not change the
//! result (a node is timed only once all its inputs are), so Q is a FIFO queue. Each node,
//! input and control edge is touched a constant number of times.
//!
//! Two points the method leaves open, decided here:
//! - **Sources.** The method gives source nodes TAT = TRT = 0. Here a source's TRT is 0
//!   and its TAT is its latency, the general rule with an empty max; the two agree for
//!   the zero-latency sources of the PipeDream training steps (the `Input` layer).
//! - **Control edges** (`from` → `to`, "runs after", no data) count as inputs of `to`
//!   without a tensor: their TAT is `from`'s finish and they take part in TRT(to), so a
//!   control edge can delay a node. Their TTS is reported in [`Timing::control`] but a
//!   control edge is never a candidate for swapping (it carries no bytes).
//!
//! Every node needs a latency (finite and ≥ 0, in milliseconds); an omitted optional
//! input (`None` slot) has no timing.

use std::collections::VecDeque;

use memplan_graph::{Graph, NodeId};

/// The timing of one node input or control edge, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct InputTiming {
    /// Tensor arrival time.
    pub tat: f64,
    /// Tensor required time (the reading node's start).
    pub trt: f64,
    /// Timing slack, `trt - tat` (never negative).
    pub tts: f64,
}

/// The result of [`analyse`].
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    /// Per node (by [`NodeId::index`]): its start, TRT(node).
    pub start: Vec<f64>,
    /// Per node: its finish, TAT(node) = start + latency.
    pub finish: Vec<f64>,
    /// Per node, per input slot: the input's timing (`None` for an omitted input).
    pub inputs: Vec<Vec<Option<InputTiming>>>,
    /// Per control edge, in [`Graph::control_edges`] order.
    pub control: Vec<InputTiming>,
    /// The largest finish (0 for an empty graph): the step time with unlimited
    /// parallelism.
    pub makespan: f64,
}

/// Why a graph cannot be timed, naming the node.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TimingError {
    #[error("node '{node}' has no latency; timing analysis needs every node's latency")]
    NoLatency { node: String },
    #[error("node '{node}': latency {ms} ms is not a finite number >= 0")]
    BadLatency { node: String, ms: f64 },
    #[error("node '{node}' is never ready: it is on a cycle of data or control edges")]
    Cycle { node: String },
}

/// Runs the timing analysis over `graph`.
pub fn analyse(graph: &Graph) -> Result<Timing, TimingError> {
    let nodes = graph.nodes();
    let n = nodes.len();
    let mut latency = Vec::with_capacity(n);
    for node in nodes {
        let ms = node.latency_ms.ok_or_else(|| TimingError::NoLatency {
            node: node.name.clone(),
        })?;
        if !ms.is_finite() || ms < 0.0 {
            return Err(TimingError::BadLatency {
                node: node.name.clone(),
                ms,
            });
        }
        latency.push(ms);
    }
    // Inputs fed by a node are unknown until that node is timed; the rest arrive at 0.
    let mut pending = vec![0usize; n];
    let mut tat: Vec<Vec<Option<f64>>> = Vec::with_capacity(n);
    for (i, node) in nodes.iter().enumerate() {
        let mut row = Vec::with_capacity(node.inputs.len());
        for input in &node.inputs {
            row.push(match input {
                None => None,
                Some(v) if graph.value(*v).producer.is_some() => {
                    pending[i] += 1;
                    None
                }
                Some(_) => Some(0.0),
            });
        }
        tat.push(row);
    }
    let edges = graph.control_edges();
    let mut control_out: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut control_in: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (e, &(from, to)) in edges.iter().enumerate() {
        control_out[from.index()].push(e);
        control_in[to.index()].push(e);
        pending[to.index()] += 1;
    }
    let mut control_tat = vec![0.0f64; edges.len()];
    let mut start = vec![0.0f64; n];
    let mut finish = vec![0.0f64; n];
    let mut done = vec![false; n];
    let mut queue: VecDeque<NodeId> = VecDeque::new();
    // Times node `i` once every input has a TAT: TRT, then its own TAT.
    let time = |i: usize,
                tat: &[Vec<Option<f64>>],
                control_tat: &[f64],
                start: &mut [f64],
                finish: &mut [f64]| {
        let data = tat[i].iter().flatten().copied();
        let ctrl = control_in[i].iter().map(|&e| control_tat[e]);
        let trt = data.chain(ctrl).fold(0.0f64, f64::max);
        start[i] = trt;
        finish[i] = trt + latency[i];
    };
    for i in 0..n {
        if pending[i] == 0 {
            time(i, &tat, &control_tat, &mut start, &mut finish);
            done[i] = true;
            queue.push_back(NodeId(i as u32));
        }
    }
    while let Some(q) = queue.pop_front() {
        let at = finish[q.index()];
        let mut ready = Vec::new();
        for &out in &nodes[q.index()].outputs {
            for &(succ, slot) in &graph.value(out).consumers {
                tat[succ.index()][slot] = Some(at);
                pending[succ.index()] -= 1;
                if pending[succ.index()] == 0 {
                    ready.push(succ.index());
                }
            }
        }
        for &e in &control_out[q.index()] {
            control_tat[e] = at;
            let to = edges[e].1.index();
            pending[to] -= 1;
            if pending[to] == 0 {
                ready.push(to);
            }
        }
        for i in ready {
            time(i, &tat, &control_tat, &mut start, &mut finish);
            done[i] = true;
            queue.push_back(NodeId(i as u32));
        }
    }
    if let Some(i) = done.iter().position(|d| !d) {
        return Err(TimingError::Cycle {
            node: nodes[i].name.clone(),
        });
    }
    let inputs = tat
        .iter()
        .enumerate()
        .map(|(i, row)| {
            row.iter()
                .map(|t| {
                    t.map(|tat| InputTiming {
                        tat,
                        trt: start[i],
                        tts: start[i] - tat,
                    })
                })
                .collect()
        })
        .collect();
    let control = edges
        .iter()
        .zip(&control_tat)
        .map(|(&(_, to), &tat)| InputTiming {
            tat,
            trt: start[to.index()],
            tts: start[to.index()] - tat,
        })
        .collect();
    let makespan = finish.iter().copied().fold(0.0f64, f64::max);
    Ok(Timing {
        start,
        finish,
        inputs,
        control,
        makespan,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use memplan_graph::{DType, Value, ValueKind};

    use super::*;
    use crate::pipedream::{parse, training_step};
    use crate::testdata::TINY;

    fn value(g: &mut Graph, name: &str, kind: ValueKind) -> memplan_graph::ValueId {
        g.add_value(Value::with_bytes(name, DType::Float, 4, kind))
            .unwrap()
    }

    fn node(
        g: &mut Graph,
        name: &str,
        ins: &[memplan_graph::ValueId],
        out: memplan_graph::ValueId,
        ms: f64,
    ) -> NodeId {
        let ins = ins.iter().map(|&v| Some(v)).collect();
        let id = g
            .add_node(name, "Op", ins, vec![out], BTreeMap::new())
            .unwrap();
        g.set_latency(id, Some(ms));
        id
    }

    /// ```text
    ///  x ─┬─> A (2 ms) ─a─┬──────────────┬─> D (3 ms) ─d
    ///     │               └─> C (1 ms) ─c┘
    ///     └─> B (4 ms) ─b─────┘
    ///                         a ─> E (1 ms) ─e, with a control edge D → E
    /// ```
    /// By hand: A and B read only the graph input x (TAT 0): both start at 0,
    /// TAT(A) = 2, TAT(B) = 4. C: TRT = max(2, 4) = 4, TTS(a) = 2, TTS(b) = 0,
    /// TAT(C) = 5. D: TRT = max(TAT a = 2, TAT c = 5) = 5, TTS(a) = 3, TTS(c) = 0,
    /// TAT(D) = 8. E: its data input a arrives at 2, the control edge at TAT(D) = 8:
    /// TRT = 8, TTS(a) = 6, control TTS 0, TAT(E) = 9 = makespan.
    #[test]
    fn diamond_with_control_edge_by_hand() {
        let mut g = Graph::new("diamond");
        let x = value(&mut g, "x", ValueKind::Input);
        let [a, b, c, d, e] =
            ["a", "b", "c", "d", "e"].map(|n| value(&mut g, n, ValueKind::Activation));
        g.set_inputs(vec![x]).unwrap();
        let na = node(&mut g, "A", &[x], a, 2.0);
        let nb = node(&mut g, "B", &[x], b, 4.0);
        let nc = node(&mut g, "C", &[a, b], c, 1.0);
        let nd = node(&mut g, "D", &[a, c], d, 3.0);
        let ne = node(&mut g, "E", &[a], e, 1.0);
        g.add_control_edge(nd, ne).unwrap();
        let t = analyse(&g).unwrap();
        let tts = |n: NodeId, slot: usize| t.inputs[n.index()][slot].unwrap().tts;
        assert_eq!((t.start[na.index()], t.finish[na.index()]), (0.0, 2.0));
        assert_eq!((t.start[nb.index()], t.finish[nb.index()]), (0.0, 4.0));
        assert_eq!((tts(na, 0), tts(nb, 0)), (0.0, 0.0));
        assert_eq!((t.start[nc.index()], t.finish[nc.index()]), (4.0, 5.0));
        assert_eq!((tts(nc, 0), tts(nc, 1)), (2.0, 0.0));
        assert_eq!((t.start[nd.index()], t.finish[nd.index()]), (5.0, 8.0));
        assert_eq!((tts(nd, 0), tts(nd, 1)), (3.0, 0.0));
        assert_eq!((t.start[ne.index()], t.finish[ne.index()]), (8.0, 9.0));
        assert_eq!(
            t.inputs[ne.index()][0].unwrap(),
            InputTiming {
                tat: 2.0,
                trt: 8.0,
                tts: 6.0
            }
        );
        assert_eq!(
            t.control,
            vec![InputTiming {
                tat: 8.0,
                trt: 8.0,
                tts: 0.0
            }]
        );
        assert_eq!(t.makespan, 9.0);
    }

    /// The TINY profile's training step, a chain (sum of latencies 0+2+1+3+6+1+4 = 17):
    /// ```text
    ///  node1 0ms [0,0]  node2 2ms [0,2]  node3 1ms [2,3]  node4 3ms [3,6]
    ///  node4.bwd 6ms [6,12]  node3.bwd 1ms [12,13]  node2.bwd 4ms [13,17]
    /// ```
    /// node2's output (storage of node3's in-place output, TAT 2) waits 1 ms at node4
    /// (start 3), 4 ms at node4.bwd (start 6) and 10 ms at node3.bwd (start 12); the
    /// Input's output (TAT 0) waits 13 ms at node2.bwd.
    #[test]
    fn training_step_by_hand() {
        let step = training_step(&parse(TINY, "tiny").unwrap()).unwrap();
        let g = &step.graph;
        let t = analyse(g).unwrap();
        let finish: Vec<f64> = t.finish.clone();
        assert_eq!(finish, [0.0, 2.0, 3.0, 6.0, 12.0, 13.0, 17.0]);
        assert_eq!(t.makespan, 17.0);
        let slack_of = |node: &str, value: memplan_graph::ValueId| {
            let n = g.node_by_name(node).unwrap();
            let slot = g
                .node(n)
                .inputs
                .iter()
                .position(|&i| i == Some(value))
                .unwrap();
            t.inputs[n.index()][slot].unwrap().tts
        };
        let conv = step.output[0];
        assert_eq!(slack_of("node4", conv), 1.0);
        assert_eq!(slack_of("node4.bwd", conv), 4.0);
        assert_eq!(slack_of("node3.bwd", conv), 10.0);
        assert_eq!(slack_of("node2.bwd", step.output[1]), 13.0);
        // The parameters (no producer) arrive at 0.
        let p = g.value_by_name("node4.param").unwrap();
        assert_eq!(slack_of("node4", p), 3.0);
    }

    #[test]
    fn errors_name_the_node() {
        let mut g = Graph::new("bad");
        let [a, b] = ["a", "b"].map(|n| value(&mut g, n, ValueKind::Activation));
        node(&mut g, "A", &[b], a, 1.0);
        let nb = node(&mut g, "B", &[a], b, 1.0);
        assert_eq!(
            analyse(&g).unwrap_err(),
            TimingError::Cycle { node: "A".into() }
        );
        g.set_latency(nb, None);
        assert_eq!(
            analyse(&g).unwrap_err(),
            TimingError::NoLatency { node: "B".into() }
        );
        g.set_latency(nb, Some(f64::NAN));
        assert!(matches!(
            analyse(&g).unwrap_err(),
            TimingError::BadLatency { .. }
        ));
        // A control edge alone can make a cycle.
        let mut g = Graph::new("ctrl");
        let [a, b] = ["a", "b"].map(|n| value(&mut g, n, ValueKind::Activation));
        let na2 = node(&mut g, "A", &[], a, 1.0);
        let nb2 = node(&mut g, "B", &[a], b, 1.0);
        g.add_control_edge(nb2, na2).unwrap();
        assert_eq!(
            analyse(&g).unwrap_err(),
            TimingError::Cycle { node: "A".into() }
        );
    }

    #[test]
    fn empty_graph() {
        let t = analyse(&Graph::new("e")).unwrap();
        assert_eq!(t.makespan, 0.0);
        assert!(t.start.is_empty());
    }
}
