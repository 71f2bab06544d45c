//! The PipeDream profiles of `../shared/benchmarks/pipedream`: every file reads and
//! builds a valid training step, the in-place model removes exactly the overstatement
//! the benchmark README gives, and the timing analysis covers every node.

use std::path::{Path, PathBuf};

use memplan_graph::{read_graph_json, write_graph_json};
use memplan_swap::pipedream::{parse, read_file, training_step, Profile};
use memplan_swap::{simulate, timing};

fn dir() -> Option<PathBuf> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/benchmarks/pipedream");
    if d.is_dir() {
        Some(d)
    } else {
        eprintln!("skipping: {} not found", d.display());
        None
    }
}

fn profile(name: &str) -> Option<Profile> {
    Some(read_file(&dir()?.join(format!("{name}.graph.txt"))).unwrap())
}

const ALL: &[&str] = &[
    "alexnet",
    "densenet121",
    "gnmt",
    "gnmt_large",
    "inception_v3",
    "nasnetalarge",
    "nasnetamobile",
    "resnet101",
    "resnet18",
    "resnet50",
    "resnext101",
    "resnext50",
    "squeezenet1_0",
    "vgg16",
];

#[test]
fn every_profile_builds_a_timed_training_step() {
    for name in ALL {
        let Some(p) = profile(name) else { return };
        let step = training_step(&p).unwrap();
        let g = &step.graph;
        let inputs = p.layers.iter().filter(|l| l.is_input()).count();
        assert_eq!(g.nodes().len(), 2 * p.layers.len() - inputs, "{name}");
        let t = timing::analyse(g).unwrap();
        assert!(t.start.iter().zip(&t.finish).all(|(s, f)| s <= f), "{name}");
        let base = simulate::no_swap(g).unwrap();
        // Serial step time: every forward time except the Input's, every backward time.
        let expected: f64 = p
            .layers
            .iter()
            .map(|l| {
                if l.is_input() {
                    l.backward_ms
                } else {
                    l.forward_ms + l.backward_ms
                }
            })
            .sum();
        assert!(
            (base.step_ms - expected).abs() < 1e-6,
            "{name}: {} vs {expected}",
            base.step_ms
        );
        // The critical path never exceeds the serial time.
        assert!(t.makespan <= base.step_ms + 1e-6, "{name}");
        assert!(base.peak_bytes > 0, "{name}");
    }
}

/// README: counting in-place layers' `activation_size` separately overstates memory by
/// 40% (ResNet-50), 47% (VGG-16), 32% (DenseNet-121) and 28% (Inception-v3), i.e. the
/// in-place bytes are that share of the total. The model's forward activation bytes
/// must be the total minus exactly the in-place bytes.
#[test]
fn inplace_sharing_removes_the_readme_overstatement() {
    for (name, percent) in [
        ("resnet50", 40),
        ("vgg16", 47),
        ("densenet121", 32),
        ("inception_v3", 28),
    ] {
        let Some(p) = profile(name) else { return };
        let step = training_step(&p).unwrap();
        let total: u64 = p.layers.iter().map(|l| l.activation_bytes).sum();
        let inplace: u64 = p
            .layers
            .iter()
            .filter(|l| l.is_inplace())
            .map(|l| l.activation_bytes)
            .sum();
        let modelled: u64 = step.output.iter().map(|&v| step.graph.value(v).bytes).sum();
        assert_eq!(modelled, total - inplace, "{name}");
        let share = (inplace as f64 / total as f64 * 100.0).round() as i64;
        assert_eq!(share, percent, "{name}");
    }
}

/// The peak of the shared model is below that of the same profile with `(inplace)`
/// removed (every layer its own storage), and never below the largest forward
/// activation.
#[test]
fn peak_reflects_the_sharing() {
    for name in ["resnet50", "vgg16", "densenet121", "inception_v3"] {
        let Some(dir) = dir() else { return };
        let path = dir.join(format!("{name}.graph.txt"));
        let text = std::fs::read_to_string(&path).unwrap();
        let shared = training_step(&parse(&text, name).unwrap()).unwrap();
        let unshared =
            training_step(&parse(&text.replace("(inplace)", ""), name).unwrap()).unwrap();
        let a = simulate::no_swap(&shared.graph).unwrap().peak_bytes;
        let b = simulate::no_swap(&unshared.graph).unwrap().peak_bytes;
        assert!(a < b, "{name}: {a} !< {b}");
        let largest = shared
            .output
            .iter()
            .map(|&v| shared.graph.value(v).bytes)
            .max()
            .unwrap();
        assert!(a >= largest, "{name}");
        eprintln!("{name}: peak {a} shared, {b} unshared");
    }
}

/// On every profile: each node starts at the latest arrival of its inputs, every slack
/// is >= 0, and the training step survives a graph JSON round trip with the same
/// timing and peak (the export path the rewritten graphs will use).
#[test]
fn timing_invariants_and_graph_json_round_trip() {
    for name in ALL {
        let Some(p) = profile(name) else { return };
        let g = training_step(&p).unwrap().graph;
        let t = timing::analyse(&g).unwrap();
        for (i, node) in g.nodes().iter().enumerate() {
            let latest = t.inputs[i]
                .iter()
                .flatten()
                .map(|x| x.tat)
                .fold(0.0, f64::max);
            assert_eq!(t.start[i], latest, "{name}: {}", node.name);
            assert!(t.inputs[i]
                .iter()
                .flatten()
                .all(|x| x.tts >= 0.0 && x.trt == t.start[i]));
            assert_eq!(t.finish[i], t.start[i] + node.latency_ms.unwrap());
        }
        let back = read_graph_json(&write_graph_json(&g), name).unwrap();
        assert_eq!(timing::analyse(&back).unwrap(), t, "{name}");
        assert_eq!(
            simulate::no_swap(&back).unwrap().peak_bytes,
            simulate::no_swap(&g).unwrap().peak_bytes,
            "{name}"
        );
    }
}
