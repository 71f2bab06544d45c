//! Execution order: the sequence in which the nodes run, validated as topological.
//!
//! A node depends on the producer of each value it reads and on the source of each control
//! edge that points at it. An order is *topological* when every node comes after all the
//! nodes it depends on:
//!
//! ```text
//!   file order:   n0 ─► n1 ─► n2        n2 reads v, produced by n1:   fine
//!   file order:   n0 ─► n2 ─► n1        n2 reads v before n1 makes it: ReadBeforeProduced
//!   n1 reads n2's output, n2 reads n1's: Cycle { nodes: [n1, n2] } in any order
//! ```
//!
//! Values that are present before the first node (step 0) need no producer: graph inputs
//! (listed in [`Graph::inputs`] or of kind [`ValueKind::Input`]), weights, and constants
//! without a producer node. Any other value a node reads, or a graph output, must be
//! produced by some node, else the graph is *dangling*.
//!
//! Checks run in this order, so a graph with several faults reports the most basic one:
//! dangling values, then cycles, then (for [`Order::File`]) the first node in file order
//! that runs before something it depends on.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::ir::{Graph, NodeId, ValueId, ValueKind};

/// Which execution order to use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Order {
    /// The nodes in the order they were added (the file's order), which must be
    /// topological.
    #[default]
    File,
    /// A topological order computed from the dependencies: Kahn's algorithm, always taking
    /// the ready node with the smallest file index. Deterministic, and equal to the file
    /// order whenever the file order is topological.
    Topological,
}

impl Order {
    /// `file` or `topological`, as the CLI's `--order` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Order::File => "file",
            Order::Topological => "topological",
        }
    }
}

/// Why no execution order exists, naming the nodes and values at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OrderError {
    #[error("node '{node}' reads value '{value}', which no node produces and which is not a graph input, weight or constant; add a producer, list it in the graph inputs, or give it kind weight/constant")]
    DanglingInput { node: String, value: String },
    #[error("graph output '{value}' is produced by no node and is not a graph input; add a node that produces it")]
    DanglingOutput { value: String },
    #[error("the nodes {} form a cycle (each depends on the one before it, the first on the last); a dataflow graph must be acyclic", quoted(.nodes))]
    Cycle { nodes: Vec<String> },
    #[error("node '{node}' (position {position}) reads value '{value}' before node '{producer}' (position {producer_position}) produces it; move '{producer}' before '{node}' or use the topological order")]
    ReadBeforeProduced {
        node: String,
        position: usize,
        value: String,
        producer: String,
        producer_position: usize,
    },
    #[error("control edge '{from}' -> '{to}': node '{to}' (position {to_position}) comes before node '{from}' (position {from_position}); move it after, or use the topological order")]
    ControlEdgeBackwards {
        from: String,
        to: String,
        from_position: usize,
        to_position: usize,
    },
}

/// `'a' -> 'b' -> 'c'`; a long cycle shows its first [`CYCLE_SHOWN`] nodes and the count
/// of the rest, so that a 100,000-node cycle stays a readable message.
fn quoted(names: &[String]) -> String {
    let quoted: Vec<String> = names
        .iter()
        .take(CYCLE_SHOWN)
        .map(|n| format!("'{n}'"))
        .collect();
    let mut text = quoted.join(" -> ");
    if names.len() > CYCLE_SHOWN {
        text.push_str(&format!(
            " -> … ({} more, {} in all)",
            names.len() - CYCLE_SHOWN,
            names.len()
        ));
    }
    text
}

/// Nodes of a cycle named in its error message.
const CYCLE_SHOWN: usize = 12;

/// For each value (indexed by [`ValueId::index`]), whether it is present before the first
/// node runs: graph inputs, weights and constants that no node produces.
pub fn available_at_start(graph: &Graph) -> Vec<bool> {
    let mut available: Vec<bool> = graph
        .values()
        .iter()
        .map(|v| {
            v.producer.is_none()
                && matches!(
                    v.kind,
                    ValueKind::Input | ValueKind::Weight | ValueKind::Constant | ValueKind::Host
                )
        })
        .collect();
    for &id in graph.inputs() {
        available[id.index()] |= graph.value(id).producer.is_none();
    }
    available
}

/// The nodes each node depends on (producers of its inputs, sources of control edges),
/// sorted and without duplicates. A node reading its own output depends on itself.
fn dependencies(graph: &Graph) -> Vec<Vec<NodeId>> {
    let mut deps: Vec<Vec<NodeId>> = vec![Vec::new(); graph.nodes().len()];
    for (index, node) in graph.nodes().iter().enumerate() {
        for &input in node.inputs.iter().flatten() {
            if let Some((producer, _)) = graph.value(input).producer {
                deps[index].push(producer);
            }
        }
    }
    for &(from, to) in graph.control_edges() {
        deps[to.index()].push(from);
    }
    for list in &mut deps {
        list.sort_unstable();
        list.dedup();
    }
    deps
}

fn check_dangling(graph: &Graph) -> Result<(), OrderError> {
    let available = available_at_start(graph);
    let dangling = |id: ValueId| graph.value(id).producer.is_none() && !available[id.index()];
    for node in graph.nodes() {
        if let Some(&id) = node.inputs.iter().flatten().find(|&&id| dangling(id)) {
            return Err(OrderError::DanglingInput {
                node: node.name.clone(),
                value: graph.value(id).name.clone(),
            });
        }
    }
    if let Some(&id) = graph.outputs().iter().find(|&&id| dangling(id)) {
        return Err(OrderError::DanglingOutput {
            value: graph.value(id).name.clone(),
        });
    }
    Ok(())
}

/// Kahn's algorithm taking the smallest ready file index first; on a cycle, the nodes of
/// one cycle in dependency order.
fn topological(graph: &Graph, deps: &[Vec<NodeId>]) -> Result<Vec<NodeId>, OrderError> {
    let n = deps.len();
    let mut dependents: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut waiting: Vec<usize> = vec![0; n];
    for (index, list) in deps.iter().enumerate() {
        waiting[index] = list.len();
        for dep in list {
            dependents[dep.index()].push(index as u32);
        }
    }
    let mut ready: BinaryHeap<Reverse<u32>> = (0..n)
        .filter(|&i| waiting[i] == 0)
        .map(|i| Reverse(i as u32))
        .collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(index)) = ready.pop() {
        order.push(NodeId(index));
        for &next in &dependents[index as usize] {
            waiting[next as usize] -= 1;
            if waiting[next as usize] == 0 {
                ready.push(Reverse(next));
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    // Every node left waits on another node left: walking dependencies among them from the
    // first such node must revisit a node, and the walk from that node back to itself is a
    // cycle.
    let Some(first) = (0..n).find(|&i| waiting[i] > 0) else {
        return Ok(order);
    };
    let mut seen_at: Vec<Option<usize>> = vec![None; n];
    let mut walk: Vec<usize> = Vec::new();
    let mut current = first;
    while seen_at[current].is_none() {
        seen_at[current] = Some(walk.len());
        walk.push(current);
        match deps[current].iter().find(|d| waiting[d.index()] > 0) {
            Some(dep) => current = dep.index(),
            None => break,
        }
    }
    let start = seen_at[current].unwrap_or(0);
    // The walk follows "depends on" edges; reverse it so each node depends on the previous.
    let nodes = walk[start..]
        .iter()
        .rev()
        .map(|&i| graph.nodes()[i].name.clone())
        .collect();
    Err(OrderError::Cycle { nodes })
}

/// The execution order of the graph's nodes, or why there is none.
///
/// [`Order::File`] returns the nodes in file order after checking that it is topological;
/// [`Order::Topological`] returns the deterministic topological order. Both fail on a
/// dangling value or a cycle.
pub fn execution_order(graph: &Graph, order: Order) -> Result<Vec<NodeId>, OrderError> {
    check_dangling(graph)?;
    let deps = dependencies(graph);
    let sorted = topological(graph, &deps)?;
    match order {
        Order::Topological => Ok(sorted),
        Order::File => {
            check_file_order(graph)?;
            Ok((0..graph.nodes().len() as u32).map(NodeId).collect())
        }
    }
}

fn check_file_order(graph: &Graph) -> Result<(), OrderError> {
    let nodes = graph.nodes();
    for (position, node) in nodes.iter().enumerate() {
        for &input in node.inputs.iter().flatten() {
            if let Some((producer, _)) = graph.value(input).producer {
                if producer.index() >= position {
                    return Err(OrderError::ReadBeforeProduced {
                        node: node.name.clone(),
                        position,
                        value: graph.value(input).name.clone(),
                        producer: nodes[producer.index()].name.clone(),
                        producer_position: producer.index(),
                    });
                }
            }
        }
    }
    for &(from, to) in graph.control_edges() {
        if from.index() >= to.index() {
            return Err(OrderError::ControlEdgeBackwards {
                from: nodes[from.index()].name.clone(),
                to: nodes[to.index()].name.clone(),
                from_position: from.index(),
                to_position: to.index(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::ir::{DType, Value};

    /// A graph from `(name, inputs, outputs)` triples; every value is a 4-byte float,
    /// `x` is the graph input.
    fn graph(nodes: &[(&str, &[&str], &[&str])]) -> Graph {
        let mut g = Graph::new("t");
        let x = g
            .add_value(Value::with_bytes("x", DType::Float, 4, ValueKind::Input))
            .unwrap();
        g.set_inputs(vec![x]).unwrap();
        for (_, inputs, outputs) in nodes {
            for name in inputs.iter().chain(outputs.iter()) {
                if g.value_by_name(name).is_none() {
                    g.add_value(Value::with_bytes(
                        *name,
                        DType::Float,
                        4,
                        ValueKind::Activation,
                    ))
                    .unwrap();
                }
            }
        }
        for (name, inputs, outputs) in nodes {
            let ins = inputs.iter().map(|n| g.value_by_name(n)).collect();
            let outs = outputs
                .iter()
                .map(|n| g.value_by_name(n).unwrap())
                .collect();
            g.add_node(*name, "Relu", ins, outs, BTreeMap::new())
                .unwrap();
        }
        g
    }

    fn names(g: &Graph, order: &[NodeId]) -> Vec<String> {
        order.iter().map(|&id| g.node(id).name.clone()).collect()
    }

    #[test]
    fn file_order_that_is_topological_is_kept() {
        let g = graph(&[("a", &["x"], &["u"]), ("b", &["u"], &["v"])]);
        assert_eq!(
            names(&g, &execution_order(&g, Order::File).unwrap()),
            ["a", "b"]
        );
    }

    #[test]
    fn read_before_produce_names_reader_and_producer() {
        let g = graph(&[("b", &["u"], &["v"]), ("a", &["x"], &["u"])]);
        let err = execution_order(&g, Order::File).unwrap_err();
        assert_eq!(
            err,
            OrderError::ReadBeforeProduced {
                node: "b".into(),
                position: 0,
                value: "u".into(),
                producer: "a".into(),
                producer_position: 1,
            }
        );
        assert_eq!(
            names(&g, &execution_order(&g, Order::Topological).unwrap()),
            ["a", "b"]
        );
    }

    #[test]
    fn topological_order_takes_smallest_file_index_first() {
        // c and a are both ready at the start; a (index 1) waits for nothing but comes
        // after c (index 0) in the file.
        let g = graph(&[
            ("c", &["x"], &["w"]),
            ("b", &["u"], &["v"]),
            ("a", &["x"], &["u"]),
        ]);
        assert_eq!(
            names(&g, &execution_order(&g, Order::Topological).unwrap()),
            ["c", "a", "b"]
        );
    }

    #[test]
    fn cycles_are_named_in_dependency_order() {
        let g = graph(&[
            ("a", &["x", "w"], &["u"]),
            ("b", &["u"], &["v"]),
            ("c", &["v"], &["w"]),
        ]);
        for order in [Order::File, Order::Topological] {
            match execution_order(&g, order).unwrap_err() {
                OrderError::Cycle { nodes } => {
                    assert_eq!(nodes.len(), 3);
                    let i = nodes.iter().position(|n| n == "a").unwrap();
                    let rotated: Vec<_> = nodes[i..].iter().chain(&nodes[..i]).collect();
                    assert_eq!(rotated, ["a", "b", "c"]);
                }
                other => panic!("expected a cycle, got {other}"),
            }
        }
        let g = graph(&[("self", &["s"], &["s"])]);
        assert_eq!(
            execution_order(&g, Order::File).unwrap_err(),
            OrderError::Cycle {
                nodes: vec!["self".into()]
            }
        );
    }

    #[test]
    fn a_long_cycle_is_a_readable_message() {
        let n = 100_000;
        let names: Vec<String> = (0..n).map(|i| format!("n{i}")).collect();
        let values: Vec<String> = (0..n).map(|i| format!("v{i}")).collect();
        let nodes: Vec<(&str, Vec<&str>, Vec<&str>)> = (0..n)
            .map(|i| {
                let input = values[(i + n - 1) % n].as_str();
                (names[i].as_str(), vec![input], vec![values[i].as_str()])
            })
            .collect();
        let triples: Vec<(&str, &[&str], &[&str])> = nodes
            .iter()
            .map(|(name, i, o)| (*name, i.as_slice(), o.as_slice()))
            .collect();
        let message = execution_order(&graph(&triples), Order::Topological)
            .unwrap_err()
            .to_string();
        assert!(
            message.len() < 600,
            "{} bytes: {}",
            message.len(),
            &message[..600]
        );
        assert!(message.contains("99988 more, 100000 in all"), "{message}");
    }

    #[test]
    fn dangling_inputs_and_outputs_are_named() {
        let mut g = graph(&[("a", &["x", "ghost"], &["u"])]);
        // "ghost" was created as an activation but nothing produces it.
        assert_eq!(
            execution_order(&g, Order::File).unwrap_err(),
            OrderError::DanglingInput {
                node: "a".into(),
                value: "ghost".into()
            }
        );
        let ghost = g.value_by_name("ghost").unwrap();
        g.set_inputs(vec![g.value_by_name("x").unwrap(), ghost])
            .unwrap();
        assert!(execution_order(&g, Order::File).is_ok());
        let lost = g
            .add_value(Value::with_bytes(
                "lost",
                DType::Float,
                4,
                ValueKind::Activation,
            ))
            .unwrap();
        g.set_outputs(vec![lost]).unwrap();
        assert!(matches!(
            execution_order(&g, Order::File),
            Err(OrderError::DanglingOutput { .. })
        ));
    }

    #[test]
    fn control_edges_order_nodes() {
        let mut g = graph(&[("a", &["x"], &["u"]), ("b", &["x"], &["v"])]);
        let (a, b) = (g.node_by_name("a").unwrap(), g.node_by_name("b").unwrap());
        g.add_control_edge(b, a).unwrap();
        assert!(matches!(
            execution_order(&g, Order::File),
            Err(OrderError::ControlEdgeBackwards { .. })
        ));
        assert_eq!(
            names(&g, &execution_order(&g, Order::Topological).unwrap()),
            ["b", "a"]
        );
        g.add_control_edge(a, b).unwrap();
        assert!(matches!(
            execution_order(&g, Order::Topological),
            Err(OrderError::Cycle { .. })
        ));
    }
}
