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

/// Feeds arbitrary bytes to the npu platform JSON reader: an error names its source; a
/// platform read has an alignment of at least 1 and plans the bundled example graph with
/// the method, the plan passing the checker.
pub fn platform_json(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let platform = match crate::npu::Platform::parse(&text, "fuzz.json") {
        Ok(platform) => platform,
        Err(error) => {
            assert!(
                error.to_string().contains("fuzz.json"),
                "an error that does not name its source: {error}"
            );
            return;
        }
    };
    assert!(platform.alignment >= 1, "alignment {}", platform.alignment);
    let graph = read_graph_json(PLATFORM_GRAPH, "platform_graph.json").expect("the graph reads");
    let Ok(analysis) = crate::npu::analyse_for(&graph, Order::File, Options::default(), &platform)
    else {
        return;
    };
    for rule in [
        memplan::planner::npu::Match::Exact,
        memplan::planner::npu::Match::Size,
        memplan::planner::npu::Match::Lifetime,
    ] {
        let Ok(planned) = crate::npu::plan_npu(
            &graph,
            &analysis,
            &platform,
            rule,
            Default::default(),
            Default::default(),
            1,
        ) else {
            continue;
        };
        let report = memplan::checker::check(&planned.problem, &planned.assignment.plan);
        assert!(
            report.is_valid(),
            "npu made an invalid plan for platform {:?}: {:?}",
            platform.name,
            report.violations
        );
    }
}

/// The graph [`platform_json`] plans: a convolution feeding two branches that join.
const PLATFORM_GRAPH: &str = r#"{
  "name": "fuzz",
  "inputs": ["x"],
  "outputs": ["y"],
  "values": [
    {"name": "x", "dtype": "FLOAT", "shape": [1, 4, 8, 8]},
    {"name": "w", "dtype": "FLOAT", "shape": [4, 4, 1, 1], "kind": "weight"},
    {"name": "c", "dtype": "FLOAT", "shape": [1, 4, 8, 8]},
    {"name": "r", "dtype": "FLOAT", "shape": [1, 4, 8, 8]},
    {"name": "s", "dtype": "FLOAT", "shape": [1, 4, 8, 8]},
    {"name": "y", "dtype": "FLOAT", "shape": [1, 4, 8, 8]}
  ],
  "nodes": [
    {"name": "conv", "op": "Conv", "inputs": ["x", "w"], "outputs": ["c"]},
    {"name": "relu", "op": "Relu", "inputs": ["c"], "outputs": ["r"]},
    {"name": "sig", "op": "Sigmoid", "inputs": ["c"], "outputs": ["s"]},
    {"name": "add", "op": "Add", "inputs": ["r", "s"], "outputs": ["y"]}
  ]
}"#;
