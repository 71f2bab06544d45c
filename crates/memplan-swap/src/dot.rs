//! Graphviz DOT export of a [`Graph`], for looking at training steps and (later) the
//! rewritten graphs.
//!
//! ```text
//! digraph "name" {
//!   n0 [label="node1\nInput 0.000 ms"];
//!   n0 -> n1 [label="node1 50 B"];          data: one edge per (producer, consumer input)
//!   n2 -> n3 [style=dashed];                control edge ("runs after", no data)
//! }
//! ```
//!
//! Nodes are `n<index>` labelled with name, op type and latency; a value read by several
//! inputs gives one edge per reading input; values without a producer (graph inputs,
//! weights) are not drawn. Names are escaped for DOT strings. The output is deterministic
//! (graph order).

use std::fmt::Write;

use memplan_graph::Graph;

/// `text` as the inside of a DOT double-quoted string.
fn escape(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The graph in Graphviz DOT.
pub fn write_dot(graph: &Graph) -> String {
    let mut out = format!("digraph \"{}\" {{\n  rankdir=TB;\n", escape(&graph.name));
    for (i, node) in graph.nodes().iter().enumerate() {
        let latency = node
            .latency_ms
            .map_or(String::new(), |ms| format!(" {ms:.3} ms"));
        let label = format!(
            "{}\\n{}{}",
            escape(&node.name),
            escape(&node.op_type),
            latency
        );
        let _ = writeln!(out, "  n{i} [shape=box, label=\"{label}\"];");
    }
    for (i, node) in graph.nodes().iter().enumerate() {
        for input in node.inputs.iter().flatten() {
            let value = graph.value(*input);
            if let Some((from, _)) = value.producer {
                let _ = writeln!(
                    out,
                    "  n{} -> n{i} [label=\"{} {} B\"];",
                    from.index(),
                    escape(&value.name),
                    value.bytes
                );
            }
        }
    }
    for (from, to) in graph.control_edges() {
        let _ = writeln!(
            out,
            "  n{} -> n{} [style=dashed];",
            from.index(),
            to.index()
        );
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipedream::{parse, training_step};
    use crate::testdata::TINY;

    #[test]
    fn tiny_training_step() {
        let mut g = training_step(&parse(TINY, "ti\"ny").unwrap())
            .unwrap()
            .graph;
        g.add_control_edge(memplan_graph::NodeId(6), memplan_graph::NodeId(6))
            .unwrap();
        let dot = write_dot(&g);
        assert!(dot.starts_with("digraph \"ti\\\"ny\" {\n"));
        assert!(dot.contains("  n0 [shape=box, label=\"node1\\nInput 0.000 ms\"];\n"));
        assert!(dot.contains("  n0 -> n1 [label=\"node1 50 B\"];\n"));
        // node4 reads node3's token and its storage, node2's output.
        assert!(dot.contains("  n2 -> n3 [label=\"node3 0 B\"];\n"));
        assert!(dot.contains("  n1 -> n3 [label=\"node2 100 B\"];\n"));
        assert!(dot.contains("  n4 -> n5 [label=\"grad:node4->node3 100 B\"];\n"));
        assert!(dot.contains("  n6 -> n6 [style=dashed];\n"));
        assert!(dot.ends_with("}\n"));
        // Parameters (no producer) are not drawn.
        assert!(!dot.contains("param"));
        assert_eq!(dot, write_dot(&g), "deterministic");
    }
}
