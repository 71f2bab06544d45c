//! The six int8 models in `../shared/tflite/`: TFLM's own head (measured in the
//! `tflite-micro` interpreter, listed in that folder's README) reproduced by `tflm-greedy`
//! on memplan's arena problem, and memplan's plans valid and never larger.

use std::path::PathBuf;

use memplan::checker::check;
use memplan::planner::{by_name, Planner, TflmGreedy};
use memplan_tflite::{arena, read_file, ArenaOptions};

fn shared() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/tflite");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipping: ../shared not found");
        None
    }
}

/// (model, TFLM head measured in the TFLM interpreter, scratch buffers TFLM requested).
const MEASURED: &[(&str, u64, usize)] = &[
    ("resnet8", 49_152, 0),
    ("ds_cnn", 16_000, 0),
    ("vww_mbv1_025", 73_728, 3),
    ("mbv2_035_96", 138_240, 3),
    ("tiny_transformer", 2_560, 27),
    ("lstm_kws", 2_320, 4),
];

#[test]
fn tflm_greedy_reproduces_tflm_heads() {
    let Some(dir) = shared() else { return };
    for &(name, head, scratch) in MEASURED {
        let path = dir.join(format!("{name}.tflite"));
        let model = read_file(&path).unwrap();
        let arena = arena(&model, ArenaOptions::default(), name).unwrap();
        let scratch_buffers = arena
            .entries
            .iter()
            .filter(|e| matches!(e, memplan_tflite::Entry::Scratch(_)))
            .count();
        assert_eq!(scratch_buffers, scratch, "{name}: scratch buffers");
        assert!(
            arena.unmodelled.is_empty(),
            "{name}: {:?}",
            arena.unmodelled
        );
        let plan = TflmGreedy.plan(&arena.problem).unwrap();
        assert!(check(&arena.problem, &plan).is_valid(), "{name}");
        assert_eq!(
            plan.arena_bytes,
            Some(head),
            "{name}: tflm-greedy vs TFLM's head"
        );
        for planner in ["best-of", "search"] {
            let ours = by_name(planner).unwrap().plan(&arena.problem).unwrap();
            let report = check(&arena.problem, &ours);
            assert!(
                report.is_valid(),
                "{name} {planner}: {:?}",
                report.violations
            );
            assert!(ours.arena_bytes.unwrap() <= head, "{name} {planner}");
        }
    }
}
