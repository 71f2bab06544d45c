//! Fuzz logic for the graph JSON reader and the lifetime analysis, shared by the
//! `graph_json` target in `fuzz/` and the smoke test in `cargo test`.

use memplan::planner::{BestOf, Planner};

use crate::{analyse, read_graph_json, write_graph_json, Options, Order};

/// Graphs with more nodes than this are read but not analysed and planned, to keep each
/// fuzz input cheap.
pub const MAX_ANALYSED_NODES: usize = 300;

/// Feeds arbitrary bytes to the graph JSON reader. Never panics unless an invariant breaks:
/// errors name the source; a graph read writes back to an equal graph; every order and
/// option set either analyses or fails with an error; an analysed graph's problem is
/// planned by `best-of` and the plan passes the checker.
pub fn graph_json(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let graph = match read_graph_json(&text, "fuzz.json") {
        Ok(graph) => graph,
        Err(error) => {
            assert!(
                error.to_string().starts_with("fuzz.json"),
                "an error that does not name its source: {error}"
            );
            return;
        }
    };
    let written = write_graph_json(&graph);
    match read_graph_json(&written, "written.json") {
        Ok(reread) => assert_eq!(reread, graph, "write/read changed the graph:\n{written}"),
        Err(error) => {
            panic!("write_graph_json wrote what read_graph_json rejects: {error}\n{written}")
        }
    }
    if graph.nodes().len() > MAX_ANALYSED_NODES {
        return;
    }
    for order in [Order::File, Order::Topological] {
        for options in [Options::NONE, Options::default()] {
            let Ok(analysis) = analyse(&graph, order, options) else {
                continue;
            };
            let Ok(plan) = BestOf.plan(&analysis.problem) else {
                continue;
            };
            let report = memplan::checker::check(&analysis.problem, &plan);
            assert!(
                report.is_valid(),
                "best-of made an invalid plan: {:?}",
                report.violations
            );
        }
    }
}
