//! PyTorch traces (`memplan_swap::torch`): a hand-written step, its training graph
//! against the measured lives, plans that the independent check accepts, and bad traces
//! refused with the op or storage named.

use memplan_swap::planner::{Goal, Improvements, Planner, Setup};
use memplan_swap::rewrite::{Codec, Reduction};
use memplan_swap::simulate::simulate;
use memplan_swap::torch::{self, ExecutionPlan, Reduced, Restore};

/// A fixture of `tests/data/torch` (`tiny.json` by hand, the others written by
/// `scripts/make_torch_fixtures.py`).
fn data(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/torch")
        .join(name)
}

/// `tiny.json`. Forward: op0 makes a (4000 B), op1 reads a and makes b (4000 B, saved), op2 reads b
/// and makes the loss (4 B). Backward: op3 (grad, 4 B) ; unpack of b ; op4 reads b and
/// makes gb (4000 B); unpack of a ; op5 reads a and gb and makes ga (4000 B, kept as a
/// gradient). a and b are saved; a is also read by op1 in forward.
fn trace_text() -> String {
    std::fs::read_to_string(data("tiny.json")).unwrap()
}

fn step() -> torch::TorchStep {
    let trace = torch::parse(&trace_text(), "tiny.json").unwrap();
    torch::training_step(&trace, "tiny.json", &Reduction::SWAP).unwrap()
}

/// The training graph's no-swap peak is the peak of the traced lives (a value lives
/// from its producer to the op after which it was freed; scratch during its op).
#[test]
fn plain_peak_is_the_measured_lives() {
    let s = step();
    let run = simulate(&s.graph, &s.machine).unwrap();
    // Lives (op ranges, inclusive): s2 [0,5], s3 [1,4], s4 [2,3], s5 [3,4], s6 [4,5],
    // s7 [5,end], scratch of op1 100 B during op1. During op4: s2 + s3 + s5 + s6 =
    // 12004; during op5: s2 + s6 + s7 = 12000; during op1: 8100.
    assert_eq!(run.peak_bytes, 12004);
    // Forward ops are never restorable; backward ops only for storages they unpacked.
    for node in s.graph.nodes() {
        let slots = match node.attributes.get(memplan_swap::rewrite::RESTORABLE) {
            Some(memplan_graph::Attribute::Ints(v)) => v.clone(),
            other => panic!("{}: {other:?}", node.name),
        };
        match node.name.as_str() {
            "op0" | "op1" | "op2" | "op3" => assert!(slots.is_empty(), "{}", node.name),
            "op4" => assert_eq!(slots, [1]),
            "op5" => assert_eq!(slots, [1]),
            other => panic!("unexpected node {other}"),
        }
    }
}

#[test]
fn a_plan_is_executable_and_checked() {
    let s = step();
    for reduction in [
        Reduction::SWAP,
        Reduction::compress(Codec::Fp16, false),
        Reduction::compress(Codec::Fp16, true),
    ] {
        for planner in [
            Planner::Method(Improvements::ALL),
            Planner::Method(Improvements::NONE),
            Planner::Everything,
        ] {
            let setup = Setup {
                machine: s.machine,
                reduction,
                goal: Goal::Budget(8200),
                th_tts_ms: None,
                th_size_bytes: None,
                max_count: None,
            };
            let plan = torch::plan(&s, planner, &setup).unwrap();
            assert!(plan.predicted_peak_bytes <= plan.plain_peak_bytes);
            assert_eq!(plan.plain_peak_bytes, 12004);
            torch::verify(&s.trace, &plan.execution).unwrap();
            if planner == Planner::Everything {
                // Every saved storage read in backward is reduced.
                let reduced: Vec<usize> = plan.execution.reduced.iter().map(|r| r.value).collect();
                assert_eq!(reduced, [2, 3], "{reduction:?}");
                assert!(plan.predicted_peak_bytes < 12004);
            }
        }
    }
}

#[test]
fn the_check_refuses_bad_plans() {
    let s = step();
    let good = ExecutionPlan {
        reduced: vec![Reduced {
            value: 2,
            wait_before_ops: vec![1],
        }],
        restores: vec![Restore {
            value: 2,
            after_op: Some(4),
            readers: vec![5],
            recompute: false,
        }],
    };
    torch::verify(&s.trace, &good).unwrap();
    let mut cases = Vec::new();
    let mut p = good.clone();
    p.reduced[0].value = 6; // not saved (a gradient)
    cases.push((p, "not a tensor saved"));
    let mut p = good.clone();
    p.restores[0].after_op = Some(5); // not before its reader
    cases.push((p, "not between its producer"));
    let mut p = good.clone();
    p.restores[0].readers = vec![1]; // a forward op
    cases.push((p, "is not a backward op"));
    let mut p = good.clone();
    p.restores[0].value = 3; // restored, never reduced
    cases.push((p, "never reduced"));
    let mut p = good.clone();
    p.reduced[0].wait_before_ops = vec![0]; // before the producer
    cases.push((p, "waits for the reduction"));
    for (plan, why) in cases {
        let e = torch::verify(&s.trace, &plan).unwrap_err().to_string();
        assert!(e.contains(why), "{e} / {why}");
    }
}

#[test]
fn bad_traces_name_the_fault() {
    let good = trace_text();
    let cases = [
        (
            good.replace("memplan-torch-trace", "other"),
            "format 'other'",
        ),
        (
            good.replace("\"version\": 1", "\"version\": 2"),
            "version 2 is not 1",
        ),
        (
            good.replace("\"inputs\": [5, 3]", "\"inputs\": [5, 99]"),
            "reads storage 99",
        ),
        (
            good.replace("\"producer\": 4,", "\"producer\": 40,"),
            "produced by op 40",
        ),
        (
            good.replace(
                "\"phase\": \"forward\", \"ms\": 1.0, \"inputs\": [3]",
                "\"phase\": \"sideways\", \"ms\": 1.0, \"inputs\": [3]",
            ),
            "phase 'sideways'",
        ),
        (
            good.replace(
                "\"ms\": 5.0, \"inputs\": [6, 2]",
                "\"ms\": -1.0, \"inputs\": [6, 2]",
            ),
            "not a time",
        ),
        (
            good.replace(
                "{\"ordinal\": 0, \"value\": 2,",
                "{\"ordinal\": 0, \"value\": 0,",
            ),
            "did not produce",
        ),
        (
            good.replace("\"d2h_bytes_per_ms\": 4000.0", "\"d2h_bytes_per_ms\": 0.0"),
            "d2h_bytes_per_ms",
        ),
        ("{".to_string(), "not valid JSON"),
        ("{\"version\": 1}".to_string(), "no \"format\" field"),
    ];
    for (text, want) in cases {
        let e = match torch::parse(&text, "t.json") {
            Err(e) => e.to_string(),
            Ok(trace) => torch::training_step(&trace, "t.json", &Reduction::SWAP)
                .unwrap_err()
                .to_string(),
        };
        assert!(e.starts_with("t.json: "), "{e}");
        assert!(e.contains(want), "{e} / {want}");
    }
}

/// Real traces (small models traced by `memplan.torch.trace`): the training step's
/// no-swap peak is the traced peak within 5 % (the traced peak also counts the few
/// allocations a first step makes outside any op; merged backward nodes hold a little
/// longer), and plans of every kind pass the check.
#[test]
fn real_traces_plan_and_check() {
    for name in ["small_cnn.json", "small_transformer.json"] {
        let text = std::fs::read_to_string(data(name)).unwrap();
        let trace = torch::parse(&text, name).unwrap();
        for reduction in [
            Reduction::SWAP,
            Reduction::compress(Codec::Fp16, false),
            Reduction::compress(Codec::Int8, true),
            Reduction::RECOMPUTE,
        ] {
            let s = torch::training_step(&trace, name, &reduction).unwrap();
            let plain = simulate(&s.graph, &s.machine).unwrap().peak_bytes;
            let measured = trace.measured_peak_bytes;
            assert!(
                plain.abs_diff(measured) * 20 <= measured,
                "{name}: simulated {plain} B, traced {measured} B"
            );
            let setup = Setup {
                machine: s.machine,
                reduction,
                goal: Goal::Budget(plain / 2),
                th_tts_ms: None,
                th_size_bytes: None,
                max_count: None,
            };
            let plan = torch::plan(&s, Planner::Method(Improvements::ALL), &setup).unwrap();
            torch::verify(&s.trace, &plan.execution).unwrap();
            assert!(plan.predicted_peak_bytes <= plain, "{name} {reduction:?}");
            if !reduction.recompute {
                assert!(
                    plan.predicted_peak_bytes < plain,
                    "{name} {reduction:?}: nothing saved"
                );
            }
        }
    }
}
