//! Times parsing and shape inference of an ONNX model, then planning its activations.
//!
//! ```sh
//! cargo run --release -p memplan-onnx --example import_timing -- ../shared/models/bert_base_like.onnx
//! ```
//!
//! The plan here is a stand-in for the graph crate's lifetime analysis: lifetimes in the
//! file's node order (node i at step i + 1, graph inputs from step 0, graph outputs to the
//! last step), each buffer planned by memplan's `best-of` planner.

use std::path::PathBuf;
use std::time::Instant;

use memplan::planner;
use memplan::problem::{Buffer, Problem};
use memplan_onnx::{decode_model, import_bytes, ImportOptions};

fn main() {
    let path = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "../shared/models/bert_base_like.onnx".to_string()),
    );
    let runs: u32 = std::env::args()
        .nth(2)
        .and_then(|r| r.parse().ok())
        .unwrap_or(20);
    let t = Instant::now();
    let bytes = std::fs::read(&path).expect("read the model");
    let read = t.elapsed();
    let source = path.display().to_string();

    let mut best = [f64::MAX; 4];
    let mut summary = String::new();
    for _ in 0..runs {
        let t0 = Instant::now();
        decode_model(&bytes, &source).expect("decode");
        let t1 = Instant::now();
        let graph = import_bytes(&bytes, &source, &ImportOptions::default()).expect("import");
        let t2 = Instant::now();
        let problem = problem_of(&graph);
        let plan = planner::by_name("best-of")
            .expect("best-of planner")
            .plan(&problem)
            .expect("plan");
        let t3 = Instant::now();
        let times = [
            (t1 - t0).as_secs_f64(),
            (t2 - t1).as_secs_f64(),
            (t3 - t2).as_secs_f64(),
            (t3 - t1).as_secs_f64(),
        ];
        for (b, t) in best.iter_mut().zip(times) {
            *b = b.min(t);
        }
        summary = format!(
            "{} nodes, {} values, {} activation buffers, max-live {} bytes, best-of arena {} bytes",
            graph.nodes().len(),
            graph.values().len(),
            problem.buffers().len(),
            memplan::bound::max_live(&problem).unwrap_or(0),
            plan.arena_bytes.unwrap_or(0)
        );
    }
    println!("{source}: {summary}");
    println!("read file           {:8.3} ms", read.as_secs_f64() * 1e3);
    println!(
        "decode protobuf     {:8.3} ms (best of {runs})",
        best[0] * 1e3
    );
    println!("decode + infer      {:8.3} ms", best[1] * 1e3);
    println!("lifetimes + plan    {:8.3} ms", best[2] * 1e3);
    println!("import + plan total {:8.3} ms", best[3] * 1e3);
}

/// Activation buffers with lifetimes in the file's node order.
fn problem_of(graph: &memplan_graph::Graph) -> Problem {
    let last = graph.nodes().len() as u64 + 1;
    let mut buffers = Vec::new();
    for (i, v) in graph.values().iter().enumerate() {
        // Empty tensors (bert has 12 INT64 [0] slices) take no memory; memplan rejects
        // zero-size buffers.
        if !v.is_activation() || v.bytes == 0 {
            continue;
        }
        let start = v.producer.map_or(0, |(n, _)| n.index() as u64 + 1);
        let mut end = v
            .consumers
            .iter()
            .map(|(n, _)| n.index() as u64 + 1)
            .max()
            .unwrap_or(start)
            + 1;
        if graph.outputs().iter().any(|o| o.index() == i) {
            end = last;
        }
        buffers.push(Buffer::new(
            v.name.clone(),
            v.bytes,
            start,
            end.max(start + 1),
        ));
    }
    Problem::new(buffers, []).expect("valid problem")
}
