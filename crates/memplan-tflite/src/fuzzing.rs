//! The logic behind the `tflite_reader` fuzz target: read any bytes as a model, and when
//! they are one, plan its arena, check the plan, embed it and read the result back. Any
//! panic is a bug; errors are expected.

use memplan::planner::{Planner, TflmGreedy};

use crate::{arena, offline_offsets, read_model, write, ArenaOptions, Sharing};

/// Runs the reader and everything downstream of it on `data`.
pub fn tflite_reader(data: &[u8]) {
    let Ok(model) = read_model(data, "fuzz.tflite") else {
        return;
    };
    for options in [
        ArenaOptions::default(),
        ArenaOptions {
            sharing: Sharing::ALL,
            keep_offline_plan: true,
            ..ArenaOptions::default()
        },
    ] {
        let Ok(arena) = arena(&model, options, "fuzz.tflite") else {
            continue;
        };
        let Ok(plan) = TflmGreedy.plan(&arena.problem) else {
            continue;
        };
        assert!(memplan::checker::check(&arena.problem, &plan).is_valid());
        let Ok(offsets) = offline_offsets(&arena, &plan, "fuzz.tflite") else {
            continue;
        };
        if data.len() < (1 << 20) {
            let written = write::with_offline_plan(data, &offsets, "fuzz.tflite")
                .expect("a model that reads must write back");
            let again = read_model(&written, "written.tflite").expect("a written model reads back");
            assert_eq!(again.subgraphs, model.subgraphs);
        }
    }
}
