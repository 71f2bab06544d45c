//! Training steps built from the ONNX models of `../shared/models`
//! (`memplan_swap::training`): every step is acyclic and timed, has one forward node per
//! model node, backward nodes that read what their op's rule names, and every forward
//! tensor a backward node reads lives until that node; the step's problem plans validly
//! (best-of, checked). Lives in the CLI crate because
//! `memplan-swap` does not depend on the ONNX importer (the CLI imports, then builds).

use std::path::{Path, PathBuf};

use memplan::planner::{BestOf, Planner};
use memplan_graph::{analyse, Options, Order, ValueKind};
use memplan_swap::training::{backward_reads, training_step, Device, Reads};
use memplan_swap::{simulate, timing};

fn models() -> Option<PathBuf> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/models");
    if d.is_dir() {
        Some(d)
    } else {
        eprintln!("skipping: {} not found", d.display());
        None
    }
}

const ALL: &[&str] = &[
    "resnet18",
    "resnet50",
    "mobilenet_v2",
    "squeezenet1_1",
    "inception_v3",
    "vit_b_16",
    "bert_base_like",
];

#[test]
fn every_shared_model_builds_a_valid_training_step() {
    let Some(dir) = models() else { return };
    let device = Device::default();
    for name in ALL {
        let forward =
            memplan_onnx::import_file(&dir.join(format!("{name}.onnx")), &Default::default())
                .unwrap();
        let step = training_step(&forward, &device).unwrap();
        let g = &step.graph;
        let backward: Vec<_> = step.backward_node.iter().flatten().collect();
        assert_eq!(
            g.nodes().len(),
            forward.nodes().len() + backward.len(),
            "{name}"
        );
        // Every convolution and fully connected layer trains its weights.
        for (f, node) in forward.nodes().iter().enumerate() {
            if matches!(node.op_type.as_str(), "Conv" | "Gemm") {
                assert!(step.backward_node[f].is_some(), "{name}: {}", node.name);
            }
        }
        // Acyclic and timed.
        let times = timing::analyse(g).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(times.makespan > 0.0, "{name}");
        let base = simulate::no_swap(g).unwrap();
        assert!(base.step_ms >= times.makespan - 1e-9, "{name}");
        // Peak: at least the forward graph's own peak (a training step keeps more).
        let fwd_peak = analyse(&forward, Order::File, Options::NONE)
            .unwrap()
            .stats
            .max_live_bytes;
        assert!(base.peak_bytes > fwd_peak, "{name}");
        let analysis = analyse(g, Order::File, Options::NONE).unwrap();
        let plan = BestOf.plan(&analysis.problem).unwrap();
        let report = memplan::checker::check(&analysis.problem, &plan);
        assert!(report.is_valid(), "{name}: {:?}", report.violations);
        let arena = memplan::plan::arena_bytes(&analysis.problem, &plan.offsets).unwrap();
        assert!(arena >= base.peak_bytes, "{name}");
        for (f, b) in step.backward_node.iter().enumerate() {
            let Some(b) = *b else { continue };
            let fnode = &forward.nodes()[f];
            let bnode = g.node(b);
            // What the rule names is read.
            let slot = |k: usize| fnode.inputs.get(k).copied().flatten();
            let mut needed: Vec<_> = match backward_reads(&fnode.op_type) {
                Reads::Nothing => vec![],
                Reads::Inputs(slots) => slots.iter().filter_map(|&k| slot(k)).collect(),
                Reads::Outputs => fnode.outputs.clone(),
                Reads::InputsAndOutputs(slots) => {
                    let mut v: Vec<_> = slots.iter().filter_map(|&k| slot(k)).collect();
                    v.extend(&fnode.outputs);
                    v
                }
                Reads::AllInputs => fnode.inputs.iter().flatten().copied().collect(),
            };
            needed.retain(|v| !bnode.inputs.contains(&Some(*v)));
            assert!(
                needed.is_empty(),
                "{name}: {} does not read {:?}",
                bnode.name,
                needed
            );
            // Every arena value it reads lives until its step (node i runs at step i + 1).
            for v in bnode.inputs.iter().flatten() {
                let value = g.value(*v);
                if !matches!(value.kind, ValueKind::Input | ValueKind::Activation)
                    || value.bytes == 0
                {
                    continue;
                }
                let life = analysis.values[v.index()].lifetime.unwrap();
                assert!(
                    life.end > b.0 as u64 + 1,
                    "{name}: '{}' dies before {} reads it",
                    value.name,
                    bnode.name
                );
            }
            // Its gradients have the activations' bytes.
            for o in &bnode.outputs {
                let grad = g.value(*o);
                let of = grad.name.rsplit_once("->").unwrap().1;
                let of = g.value(g.value_by_name(of).unwrap());
                assert_eq!((grad.bytes, &grad.shape), (of.bytes, &of.shape), "{name}");
            }
        }
    }
}
