//! Choosing the tensors to swap (the `swap` method, "Choosing tensors").
//!
//! Parameters: a slack threshold thTTS, a size threshold thS and a maximum count N. The
//! candidates are the node inputs with TTS > thTTS and size > thS; when there are more
//! than N, they are sorted by size, largest first, and the first N kept.
//!
//! Decisions the method leaves open:
//! - Candidates are *node inputs* (a tensor read by two nodes may appear twice, once per
//!   reading input), as the method counts them; the rewriting step groups them by value
//!   (one reduction feeding several restores).
//! - Only values in the activation arena ([`memplan_graph::Value::is_activation`]) are
//!   candidates: weights and constants are not device activations in memplan's model,
//!   and control edges carry no tensor. Host values (outputs of a copy to the host, in a
//!   rewritten graph) are not device memory and never candidates.
//! - Our improvement, off unless [`Params::link_bytes_per_ms`] is set (not in the method,
//!   to be measured with the simulator): an input qualifies only when its slack also
//!   covers the round trip at the link speed, `TTS >= 2 * bytes / link` (the copy to the
//!   host and the copy back both have to fit in the wait).
//! - The result is always sorted (size descending, then slack descending, then node and
//!   slot), whether or not N cut it, so it is deterministic; the set is the method's.

use memplan_graph::{Graph, NodeId, ValueId};

use crate::rewrite::restorable;
use crate::simulate::is_host;
use crate::timing::Timing;

/// thTTS, thS and N.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    /// thTTS: an input is a candidate when its slack is strictly greater (ms).
    pub th_tts_ms: f64,
    /// thS: an input is a candidate when its tensor is strictly larger (bytes).
    pub th_size_bytes: u64,
    /// N: the most candidates kept; `None` keeps all.
    pub max_count: Option<usize>,
    /// Our improvement: the link speed in bytes per millisecond (12 GB/s is 1.2e7); when
    /// set, the slack must cover the round trip `2 * bytes / link`.
    pub link_bytes_per_ms: Option<f64>,
}

impl Params {
    /// The method as stated: thTTS, thS and N, no link test.
    pub fn method(th_tts_ms: f64, th_size_bytes: u64, max_count: Option<usize>) -> Params {
        Params {
            th_tts_ms,
            th_size_bytes,
            max_count,
            link_bytes_per_ms: None,
        }
    }
}

/// One chosen node input.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    /// The reading node and its input slot.
    pub node: NodeId,
    pub slot: usize,
    /// The tensor it reads.
    pub value: ValueId,
    pub bytes: u64,
    /// Its timing slack (ms).
    pub tts_ms: f64,
}

/// The candidates of `graph` under `params`, given its [`Timing`] (from
/// [`crate::timing::analyse`] on the same graph).
pub fn candidates(graph: &Graph, timing: &Timing, params: &Params) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (i, node) in graph.nodes().iter().enumerate() {
        for (slot, input) in node.inputs.iter().enumerate() {
            let (Some(value), Some(Some(t))) = (input, timing.inputs[i].get(slot)) else {
                continue;
            };
            let v = graph.value(*value);
            let covers = match params.link_bytes_per_ms {
                Some(link) => t.tts >= 2.0 * v.bytes as f64 / link,
                None => true,
            };
            if v.is_activation()
                && !is_host(graph, *value)
                && restorable(graph, NodeId(i as u32), slot)
                && t.tts > params.th_tts_ms
                && v.bytes > params.th_size_bytes
                && covers
            {
                out.push(Candidate {
                    node: NodeId(i as u32),
                    slot,
                    value: *value,
                    bytes: v.bytes,
                    tts_ms: t.tts,
                });
            }
        }
    }
    out.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then(b.tts_ms.total_cmp(&a.tts_ms))
            .then(a.node.cmp(&b.node))
            .then(a.slot.cmp(&b.slot))
    });
    if let Some(n) = params.max_count {
        out.truncate(n);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipedream::{parse, training_step};
    use crate::testdata::TINY;
    use crate::timing::analyse;

    /// The TINY training step (slacks by hand in `timing`'s tests). Inputs with a
    /// positive slack and bytes, in the activation arena:
    /// ```text
    ///  reader      tensor          bytes  TTS
    ///  node4       node2 (conv)     100    1
    ///  node4.bwd   node2            100    4
    ///  node3.bwd   node2            100   10
    ///  node2.bwd   node1 (input)     50   13
    /// ```
    /// node3's token (0 bytes) and the parameters (weights) never qualify, whatever
    /// their slack.
    fn chosen(
        th_tts_ms: f64,
        th_size_bytes: u64,
        max_count: Option<usize>,
    ) -> Vec<(String, u64, f64)> {
        chosen_with(Params::method(th_tts_ms, th_size_bytes, max_count))
    }

    fn chosen_with(params: Params) -> Vec<(String, u64, f64)> {
        let step = training_step(&parse(TINY, "tiny").unwrap()).unwrap();
        let g = &step.graph;
        let t = analyse(g).unwrap();
        candidates(g, &t, &params)
            .into_iter()
            .map(|c| {
                assert_eq!(g.node(c.node).inputs[c.slot], Some(c.value));
                (g.node(c.node).name.clone(), c.bytes, c.tts_ms)
            })
            .collect()
    }

    fn row(node: &str, bytes: u64, tts: f64) -> (String, u64, f64) {
        (node.to_string(), bytes, tts)
    }

    #[test]
    fn all_candidates_sorted_by_size_then_slack() {
        assert_eq!(
            chosen(0.0, 0, None),
            [
                row("node3.bwd", 100, 10.0),
                row("node4.bwd", 100, 4.0),
                row("node4", 100, 1.0),
                row("node2.bwd", 50, 13.0),
            ]
        );
    }

    #[test]
    fn thresholds_are_strict() {
        // TTS must exceed 4: node4.bwd (exactly 4) and node4 drop out.
        assert_eq!(
            chosen(4.0, 0, None),
            [row("node3.bwd", 100, 10.0), row("node2.bwd", 50, 13.0)]
        );
        // Size must exceed 50: the Input's 50 bytes drop out.
        assert_eq!(chosen(0.0, 50, None).len(), 3);
        assert_eq!(chosen(0.0, 100, None), []);
    }

    #[test]
    fn n_keeps_the_largest() {
        assert_eq!(
            chosen(0.0, 0, Some(2)),
            [row("node3.bwd", 100, 10.0), row("node4.bwd", 100, 4.0)]
        );
        assert_eq!(chosen(0.0, 0, Some(0)), []);
        assert_eq!(chosen(0.0, 0, Some(99)).len(), 4);
    }

    /// Link 50 bytes/ms: 100 bytes need a 4 ms round trip (node4's 1 ms slack is too
    /// short, node4.bwd's 4 ms just enough), 50 bytes need 2 ms.
    #[test]
    fn link_test_drops_short_slacks() {
        let params = Params {
            link_bytes_per_ms: Some(50.0),
            ..Params::method(0.0, 0, None)
        };
        assert_eq!(
            chosen_with(params),
            [
                row("node3.bwd", 100, 10.0),
                row("node4.bwd", 100, 4.0),
                row("node2.bwd", 50, 13.0),
            ]
        );
    }
}
