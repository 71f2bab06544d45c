//! The simulator; for now only the no-swap baseline.
//!
//! The baseline runs the nodes one after another on a single compute stream, in the
//! graph's node order (which must be topological, as [`Order::File`] requires): the step
//! time is the sum of the latencies. Its peak device memory is the max-live bound of the
//! activation arena from [`memplan_graph::analyse`] with [`Options::NONE`] (the training
//! steps of [`crate::pipedream`] make storage sharing explicit, so the analysis must not
//! add its own): the largest sum of the bytes live at one step, which is what an ideal
//! allocator reaches with these lifetimes. Weights and constants are not counted.
//!
//! Still to come (see `doc/swap.md`): the D2H and H2D copy engines, control edges as
//! waits, allocation timed by copies, the pinned host pool, and the memory profile.

use memplan_graph::{analyse, AnalysisError, Graph, Options, Order};

/// What a run measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Report {
    /// Step time in milliseconds.
    pub step_ms: f64,
    /// Peak device memory of the activation arena, in bytes.
    pub peak_bytes: u64,
    /// Number of nodes run.
    pub nodes: usize,
}

/// Why a graph cannot be simulated.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SimulateError {
    #[error("node '{node}' has no latency; the simulator needs every node's latency")]
    NoLatency { node: String },
    #[error("node '{node}': latency {ms} ms is not a finite number >= 0")]
    BadLatency { node: String, ms: f64 },
    #[error(transparent)]
    Analysis(#[from] AnalysisError),
}

/// The no-swap baseline: serial step time and max-live peak.
pub fn no_swap(graph: &Graph) -> Result<Report, SimulateError> {
    let mut step_ms = 0.0;
    for node in graph.nodes() {
        let ms = node.latency_ms.ok_or_else(|| SimulateError::NoLatency {
            node: node.name.clone(),
        })?;
        if !ms.is_finite() || ms < 0.0 {
            return Err(SimulateError::BadLatency {
                node: node.name.clone(),
                ms,
            });
        }
        step_ms += ms;
    }
    let analysis = analyse(graph, Order::File, Options::NONE)?;
    Ok(Report {
        step_ms,
        peak_bytes: analysis.stats.max_live_bytes,
        nodes: graph.nodes().len(),
    })
}
