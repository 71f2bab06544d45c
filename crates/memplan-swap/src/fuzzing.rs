//! The logic behind the `pipedream_reader` fuzz target in `fuzz/`, shared with the smoke
//! test (`tests/fuzz_smoke.rs`).
//!
//! [`pipedream_reader`] panics only when an invariant breaks; that panic is what the
//! fuzzer reports.

use memplan::planner::{BestOf, Planner};
use memplan_graph::{analyse, read_graph_json, write_graph_json, Options, Order};

use crate::pipedream::{parse, training_step};
use crate::{simulate, timing};

/// Training steps with more nodes than this are built but not analysed and planned, to
/// keep each fuzz input cheap.
pub const MAX_ANALYSED_NODES: usize = 400;

/// Feeds arbitrary bytes (read as lossy UTF-8) to the PipeDream `graph.txt` reader and
/// the training-step builder. Invariants: every error names the file and a line of it
/// (0 for the whole file); a profile read has layers with finite times ≥ 0; its training
/// step has one forward node per layer and one backward node per non-`Input` layer, is
/// timed by [`timing::analyse`] (acyclic, every latency valid), has a serial step time
/// (the [`simulate::no_swap`] baseline) at least its critical path, writes to graph JSON
/// and reads back equal, and, when its bytes do not overflow, analyses in file order into
/// a problem whose `best-of` plan passes the checker.
pub fn pipedream_reader(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let lines = text.lines().count();
    let profile = match parse(&text, "fuzz.graph.txt") {
        Ok(profile) => profile,
        Err(error) => {
            assert!(
                error.to_string().starts_with("fuzz.graph.txt:"),
                "an error that does not name its source: {error}"
            );
            assert!(
                error.line <= lines,
                "line {} of {lines}: {error}",
                error.line
            );
            return;
        }
    };
    for layer in &profile.layers {
        assert!(layer.forward_ms.is_finite() && layer.forward_ms >= 0.0);
        assert!(layer.backward_ms.is_finite() && layer.backward_ms >= 0.0);
    }
    let step = match training_step(&profile) {
        Ok(step) => step,
        Err(error) => {
            assert!(
                error.to_string().starts_with("fuzz.graph.txt:") && error.line >= 1,
                "a step error that does not name a line: {error}"
            );
            return;
        }
    };
    let graph = &step.graph;
    let inputs = profile.layers.iter().filter(|l| l.is_input()).count();
    assert_eq!(graph.nodes().len(), 2 * profile.layers.len() - inputs);
    let times = timing::analyse(graph).expect("a training step is acyclic and timed");
    if let Ok(base) = simulate::no_swap(graph) {
        // Sums of finite times may round; allow a relative slack.
        assert!(
            base.step_ms >= times.makespan * (1.0 - 1e-9),
            "serial {} < critical path {}",
            base.step_ms,
            times.makespan
        );
    }
    let written = write_graph_json(graph);
    match read_graph_json(&written, "written.json") {
        Ok(reread) => assert_eq!(&reread, graph, "write/read changed the graph"),
        Err(error) => panic!("write_graph_json wrote what read_graph_json rejects: {error}"),
    }
    if graph.nodes().len() > MAX_ANALYSED_NODES {
        return;
    }
    // The only analysis error left is 64-bit overflow of the live bytes.
    let Ok(analysis) = analyse(graph, Order::File, Options::NONE) else {
        return;
    };
    let Ok(plan) = BestOf.plan(&analysis.problem) else {
        return;
    };
    let report = memplan::checker::check(&analysis.problem, &plan);
    assert!(
        report.is_valid(),
        "best-of made an invalid plan: {:?}",
        report.violations
    );
}

/// One layer of a generated PipeDream profile: forward and backward ms, activation KiB,
/// in place, and the earlier layers it reads (as offsets back from itself).
pub type Layer = (u32, u32, u32, bool, Vec<usize>);

/// A PipeDream `graph.txt` profile of `layers` after an input, for property tests: an
/// in-place layer (not the first) writes into its predecessor and has 1 byte of
/// activation; every layer reads its predecessor first, then its skips.
pub fn profile_text(layers: &[Layer]) -> String {
    let mut text = String::from(
        "node1 -- Input -- forward_compute_time=0.000, backward_compute_time=0.000, activation_size=4096.000, parameter_size=0.000\n",
    );
    let mut edges = String::new();
    for (i, (fwd, bwd, size, inplace, back)) in layers.iter().enumerate() {
        let id = i + 2;
        let (kind, size) = if *inplace && i > 0 {
            ("ReLU(inplace)", 1)
        } else {
            ("Conv2d(3, 8)", *size as u64 * 1024)
        };
        text.push_str(&format!(
            "node{id} -- {kind} -- forward_compute_time={fwd}.000, backward_compute_time={bwd}.000, activation_size={size}.000, parameter_size=64.000\n"
        ));
        // The previous layer first (in-place layers write into it), then skips.
        let mut preds = vec![id - 1];
        for &b in back {
            let p = id.saturating_sub(b + 2).max(1);
            if !preds.contains(&p) {
                preds.push(p);
            }
        }
        for p in preds {
            edges.push_str(&format!("\tnode{p} -- node{id}\n"));
        }
    }
    text + &edges
}

/// Feeds arbitrary bytes (read as lossy UTF-8) to the PyTorch trace reader
/// ([`crate::torch::parse`]), the training-step builder for each kind of reduction, and,
/// for small steps, the swap planner with its independent check. Invariants: every error
/// names the file; a step builds a graph whose simulation works; a plan found passes
/// [`crate::torch::verify`] (which [`crate::torch::plan`] also runs: an `Invalid` error is
/// a broken invariant) and never predicts more than the no-swap peak under a budget it
/// met.
pub fn torch_trace(data: &[u8]) {
    use crate::planner::{Goal, Improvements, Planner, Setup};
    use crate::rewrite::{Codec, Reduction};
    use crate::torch;

    let text = String::from_utf8_lossy(data);
    let named = |e: &dyn std::fmt::Display| {
        let e = e.to_string();
        assert!(
            e.starts_with("fuzz.json:"),
            "an error that does not name its source: {e}"
        );
    };
    let trace = match torch::parse(&text, "fuzz.json") {
        Ok(trace) => trace,
        Err(e) => return named(&e),
    };
    for reduction in [
        Reduction::SWAP,
        Reduction::compress(Codec::Fp16, false),
        Reduction::RECOMPUTE,
    ] {
        let step = match torch::training_step(&trace, "fuzz.json", &reduction) {
            Ok(step) => step,
            Err(e) => return named(&e),
        };
        if step.graph.nodes().len() > MAX_ANALYSED_NODES {
            return;
        }
        let Ok(plain) = simulate::simulate(&step.graph, &step.machine) else {
            return;
        };
        let setup = Setup {
            machine: step.machine,
            reduction,
            goal: Goal::Budget(plain.peak_bytes / 2),
            th_tts_ms: None,
            th_size_bytes: None,
            max_count: None,
        };
        match torch::plan(&step, Planner::Method(Improvements::ALL), &setup) {
            Ok(plan) => {
                torch::verify(&step.trace, &plan.execution).expect("a plan that passed verify");
                assert_eq!(plan.plain_peak_bytes, plain.peak_bytes);
                if plan.met {
                    assert!(plan.predicted_peak_bytes <= plain.peak_bytes / 2);
                }
            }
            Err(torch::TorchPlanError::Invalid(why)) => {
                panic!("the planner made a plan its check refuses: {why}")
            }
            Err(_) => {}
        }
    }
}
