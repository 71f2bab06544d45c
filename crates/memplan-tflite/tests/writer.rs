//! Writing offline plans into models (`write::with_offline_plan`) and checking embedded
//! ones (`check_offline`): on every fixture and, when `../shared` is there, the six shared
//! models.

use std::path::{Path, PathBuf};

use memplan::checker::{check, Violation};
use memplan::planner::{by_name, Planner, TflmGreedy};
use memplan::Plan;
use memplan_tflite::offline::{self, METADATA_NAME, ONLINE};
use memplan_tflite::schema_generated::tflite::root_as_model;
use memplan_tflite::write::{self, with_offline_plan};
use memplan_tflite::{
    arena, check_offline, offline_offsets, read_model, tflm_placement, Arena, ArenaOptions, Entry,
    Model, Sharing, TfliteError,
};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn shared() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/tflite");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipping: ../shared not found");
        None
    }
}

/// `.tflite` files of a folder, sorted.
fn tflite_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tflite"))
        .collect();
    files.sort();
    files
}

/// Every fixture, then the shared models when there (the skip message otherwise).
fn all_models() -> Vec<(String, Vec<u8>)> {
    let mut files = tflite_files(&data_dir());
    assert!(files.len() >= 5, "fixtures missing: {files:?}");
    if let Some(dir) = shared() {
        let models = tflite_files(&dir);
        assert_eq!(models.len(), 6, "{models:?}");
        files.extend(models);
    }
    files
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect()
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(data_dir().join(name)).unwrap()
}

/// A plan of `arena` by `planner`, checked valid.
fn valid_plan(arena: &Arena, planner: &dyn Planner, file: &str) -> Plan {
    let plan = planner.plan(&arena.problem).unwrap();
    let report = check(&arena.problem, &plan);
    assert!(
        report.is_valid(),
        "{file} {}: {:?}",
        planner.name(),
        report.violations
    );
    plan
}

/// The offline plan of `planner`'s plan of the model's arena with `sharing`.
fn offline_plan(model: &Model, sharing: Sharing, planner: &dyn Planner, file: &str) -> Vec<i32> {
    let options = ArenaOptions {
        sharing,
        ..ArenaOptions::default()
    };
    let arena = arena(model, options, file).unwrap();
    let plan = valid_plan(&arena, planner, file);
    let offsets = offline_offsets(&arena, &plan, file).unwrap();
    assert_eq!(offsets.len(), arena.tensor_count, "{file}");
    // Every planned tensor at its buffer's offset, every other one -1.
    let mut expected = vec![ONLINE; arena.tensor_count];
    for (b, entry) in arena.entries.iter().enumerate() {
        if let Entry::Tensors(group) = entry {
            for &(s, t) in group {
                expected[arena.subgraph_offsets[s] + t] = plan.offsets[b] as i32;
            }
        }
    }
    assert_eq!(offsets, expected, "{file}");
    offsets
}

/// Asserts every buffer's data starts 16-byte aligned from the file's start and the file
/// is a multiple of 16 bytes long.
fn assert_aligned(bytes: &[u8], file: &str) {
    assert_eq!(bytes.len() % 16, 0, "{file}: {} bytes", bytes.len());
    let model = root_as_model(bytes).unwrap();
    let base = bytes.as_ptr() as usize;
    let mut with_data = 0;
    for (i, buffer) in model.buffers().unwrap().iter().enumerate() {
        if let Some(data) = buffer.data() {
            let at = data.bytes().as_ptr() as usize - base;
            assert!(at + data.len() <= bytes.len());
            assert_eq!(at % 16, 0, "{file}: buffer {i}'s data starts at {at}");
            with_data += 1;
        }
    }
    assert!(with_data > 0, "{file}: no buffer has data");
}

/// The `OfflineMemoryAllocation` entries of a model.
fn plan_entries(model: &Model) -> usize {
    model
        .metadata
        .iter()
        .filter(|m| m.name == METADATA_NAME)
        .count()
}

/// The written model means the same as the original: equal subgraphs, version and
/// description, every original buffer's bytes and every other metadata entry kept.
fn assert_same_model(original: &[u8], written: &[u8], file: &str) {
    let before = read_model(original, file).unwrap();
    let after = read_model(written, "written.tflite").unwrap();
    assert_eq!(after.version, before.version, "{file}");
    assert_eq!(after.description, before.description, "{file}");
    assert_eq!(after.subgraphs, before.subgraphs, "{file}");
    let others = |m: &Model| -> Vec<(String, Vec<u8>)> {
        m.metadata
            .iter()
            .filter(|m| m.name != METADATA_NAME)
            .map(|m| (m.name.clone(), m.data.clone()))
            .collect()
    };
    assert_eq!(others(&after), others(&before), "{file}");
    // Everything else of the flatbuffer, through the object API: equal but for buffers and
    // metadata, and every buffer of the original there with the same bytes.
    let mut a = root_as_model(original).unwrap().unpack();
    let mut b = root_as_model(written).unwrap().unpack();
    let plan_buffers = |m: &memplan_tflite::schema_generated::tflite::ModelT| -> Vec<u32> {
        m.metadata
            .iter()
            .flatten()
            .filter(|e| e.name.as_deref() == Some(METADATA_NAME))
            .map(|e| e.buffer)
            .collect()
    };
    let (a_plan, b_plan) = (plan_buffers(&a), plan_buffers(&b));
    let a_buffers = a.buffers.take().unwrap_or_default();
    let b_buffers = b.buffers.take().unwrap_or_default();
    assert!(b_buffers.len() >= a_buffers.len(), "{file}");
    for (i, buffer) in a_buffers.iter().enumerate() {
        if a_plan.contains(&(i as u32)) || b_plan.contains(&(i as u32)) {
            continue;
        }
        assert_eq!(
            b_buffers[i].data.as_deref().unwrap_or_default(),
            buffer.data.as_deref().unwrap_or_default(),
            "{file}: buffer {i}"
        );
        assert_eq!(
            (b_buffers[i].offset, b_buffers[i].size),
            (buffer.offset, buffer.size)
        );
    }
    a.metadata = None;
    b.metadata = None;
    assert_eq!(a, b, "{file}: the model apart from buffers and metadata");
}

#[test]
fn round_trip_on_every_model() {
    for (file, bytes) in all_models() {
        let model = read_model(&bytes, &file).unwrap();
        assert_eq!(
            plan_entries(&model),
            0,
            "{file} already has an offline plan"
        );
        let offsets = offline_plan(&model, Sharing::NONE, &TflmGreedy, &file);
        let written = with_offline_plan(&bytes, &offsets, &file).unwrap();
        assert_aligned(&written, &file);
        assert_same_model(&bytes, &written, &file);
        let again = read_model(&written, "written.tflite").unwrap();
        assert_eq!(plan_entries(&again), 1, "{file}");
        assert_eq!(again.buffers.len(), model.buffers.len() + 1, "{file}");
        assert_eq!(
            offline::read(&again, "written.tflite").unwrap(),
            Some(offsets.clone()),
            "{file}"
        );
        let entry = again
            .metadata
            .iter()
            .find(|m| m.name == METADATA_NAME)
            .unwrap();
        assert_eq!(entry.data, offline::encode(&offsets));
        assert_eq!(entry.data.len(), 4 * (offsets.len() + 3));
        let header: Vec<u8> = [1i32, 0, offsets.len() as i32]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        assert_eq!(
            entry.data[..12],
            header[..],
            "{file}: version 1, subgraph 0, count"
        );
        // Reading with the plan kept gives the same arena and the plan.
        let kept = arena(
            &again,
            ArenaOptions {
                keep_offline_plan: true,
                ..ArenaOptions::default()
            },
            &file,
        )
        .unwrap();
        assert_eq!(kept.offline.as_deref(), Some(&offsets[..]), "{file}");
        let plain = arena(&model, ArenaOptions::default(), &file).unwrap();
        assert_eq!(kept.problem, plain.problem, "{file}");

        // Writing a second plan replaces the first: one entry, no new buffer.
        let second = offline_plan(&model, Sharing::ALL, by_name("best-of").unwrap(), &file);
        let rewritten = with_offline_plan(&written, &second, "written.tflite").unwrap();
        assert_aligned(&rewritten, &file);
        assert_same_model(&written, &rewritten, &file);
        assert_same_model(&bytes, &rewritten, &file);
        let twice = read_model(&rewritten, "rewritten.tflite").unwrap();
        assert_eq!(plan_entries(&twice), 1, "{file}");
        assert_eq!(twice.buffers.len(), again.buffers.len(), "{file}");
        assert_eq!(
            offline::read(&twice, "rewritten.tflite").unwrap(),
            Some(second.clone()),
            "{file}"
        );
        let fb = root_as_model(&rewritten).unwrap();
        let names: Vec<&str> = fb
            .metadata()
            .unwrap()
            .iter()
            .filter_map(|m| m.name())
            .filter(|&n| n == METADATA_NAME)
            .collect();
        assert_eq!(names.len(), 1, "{file}");

        // Writing the same plan again gives the same bytes.
        let same = with_offline_plan(&rewritten, &second, "rewritten.tflite").unwrap();
        assert_eq!(same, rewritten, "{file}");
    }
}

/// The head of `placement`: the largest `offset + size`.
fn head(arena: &Arena, placement: &[u64]) -> u64 {
    arena
        .problem
        .buffers()
        .iter()
        .zip(placement)
        .map(|(b, &o)| o + b.size)
        .max()
        .unwrap_or(0)
}

#[test]
fn check_offline_accepts_valid_plans() {
    for (file, bytes) in all_models() {
        let model = read_model(&bytes, &file).unwrap();
        assert!(
            check_offline(&model, &file).unwrap().is_none(),
            "{file}: no plan yet"
        );
        for (sharing, planner) in [
            (Sharing::NONE, "tflm-greedy"),
            (Sharing::NONE, "best-of"),
            (Sharing::ALL, "best-of"),
        ] {
            let planner = by_name(planner).unwrap();
            let options = ArenaOptions {
                sharing,
                ..ArenaOptions::default()
            };
            let planned = arena(&model, options, &file).unwrap();
            let plan = valid_plan(&planned, planner, &file);
            let offsets = offline_offsets(&planned, &plan, &file).unwrap();
            let written = with_offline_plan(&bytes, &offsets, &file).unwrap();
            let again = read_model(&written, &file).unwrap();
            let verdict = check_offline(&again, &file)
                .unwrap()
                .expect("a plan to check");
            let what = format!("{file} {} {sharing:?}", planner.name());
            assert!(
                verdict.report.is_valid(),
                "{what}: {:?}",
                verdict.report.violations
            );
            assert_eq!(verdict.arena.tensor_count, offsets.len(), "{what}");
            assert_eq!(verdict.arena.offline.as_deref(), Some(&offsets[..]));
            let placement = tflm_placement(&verdict.arena, &offsets, &file).unwrap();
            assert_eq!(verdict.offsets, placement, "{what}");
            assert_eq!(verdict.head, head(&verdict.arena, &placement), "{what}");
            assert_eq!(
                verdict.placed_tensors,
                offsets.iter().filter(|&&o| o != ONLINE).count()
            );
            // The placement keeps every planned tensor where the plan put it.
            for (b, entry) in verdict.arena.entries.iter().enumerate() {
                if let Entry::Tensors(group) = entry {
                    let (s, t) = group[0];
                    let word = offsets[verdict.arena.subgraph_offsets[s] + t];
                    assert!(word >= 0, "{what}: tensor {t} is planned but -1");
                    assert_eq!(placement[b], word as u64, "{what}: tensor {t}");
                }
            }
            // The checker on TFLM's placement: valid up to the sharing kernels allow.
            let report = check(
                &verdict.arena.problem,
                &Plan::new(&verdict.arena.problem, placement.clone()).unwrap(),
            );
            let overlaps = report
                .violations
                .iter()
                .filter(|v| matches!(v, Violation::Overlap { .. }))
                .count();
            assert_eq!(overlaps, verdict.allowed_sharing.len(), "{what}");
            assert_eq!(report.violations.len(), overlaps, "{what}");
            if sharing == Sharing::NONE {
                assert!(verdict.allowed_sharing.is_empty(), "{what}");
                // Without scratch buffers, every buffer is a tensor the plan places: TFLM's
                // head is the plan's arena.
                if verdict
                    .arena
                    .entries
                    .iter()
                    .all(|e| matches!(e, Entry::Tensors(_)))
                {
                    assert_eq!(Some(verdict.head), plan.arena_bytes, "{what}");
                    assert_eq!(placement, plan.offsets, "{what}");
                }
            }
        }
    }
}

#[test]
fn shared_bytes_are_allowed_only_as_kernels_allow() {
    // elementwise.tflite planned with RESHAPE and in-place sharing: the merged tensors share
    // offsets, which check_offline lists as allowed, not as violations.
    let file = "elementwise.tflite";
    let bytes = fixture(file);
    let model = read_model(&bytes, file).unwrap();
    let offsets = offline_plan(&model, Sharing::ALL, &TflmGreedy, file);
    let written = with_offline_plan(&bytes, &offsets, file).unwrap();
    let verdict = check_offline(&read_model(&written, file).unwrap(), file)
        .unwrap()
        .unwrap();
    assert!(verdict.report.is_valid(), "{:?}", verdict.report.violations);
    assert!(!verdict.allowed_sharing.is_empty());
    for (a, b) in &verdict.allowed_sharing {
        let group = [
            "input",
            "add",
            "logistic",
            "mul",
            "reshape",
            "sub",
            "requantize",
            "mul_out",
        ];
        assert!(
            group.contains(&a.as_str()) && group.contains(&b.as_str()),
            "{a} {b}"
        );
    }
    assert_eq!(verdict.head, 1024);

    // The same sharing with the offsets apart by 16 bytes is no longer allowed: `add` moved
    // 16 bytes above `input` overlaps it while both are live.
    let mut moved = offsets.clone();
    moved[2] += 16;
    let written = with_offline_plan(&bytes, &moved, file).unwrap();
    let verdict = check_offline(&read_model(&written, file).unwrap(), file)
        .unwrap()
        .unwrap();
    assert!(
        verdict.report.violations.iter().any(|v| matches!(
            v,
            Violation::Overlap { a_name, b_name, .. } if a_name == "input" && b_name == "add"
        )),
        "{:?}",
        verdict.report.violations
    );
}

/// The buffer of `arena` whose first tensor has index `global` in the offline plan.
fn buffer_of(arena: &Arena, global: usize) -> usize {
    arena
        .entries
        .iter()
        .position(
            |e| matches!(e, Entry::Tensors(g) if arena.subgraph_offsets[g[0].0] + g[0].1 == global),
        )
        .unwrap_or_else(|| panic!("tensor {global} is not planned"))
}

/// Two planned tensors (their indices in the offline plan and their buffer names) that
/// TFLM keeps live at the same time and that no sharing merges.
fn clashing_pair(model: &Model, arena: &Arena, file: &str) -> ((usize, String), (usize, String)) {
    let shared = memplan_tflite::arena(
        model,
        ArenaOptions {
            sharing: Sharing::ALL,
            ..ArenaOptions::default()
        },
        file,
    )
    .unwrap();
    let group_of = |st: (usize, usize)| {
        shared
            .entries
            .iter()
            .position(|e| matches!(e, Entry::Tensors(g) if g.contains(&st)))
    };
    let buffers = arena.problem.buffers();
    let global = |(s, t): (usize, usize)| arena.subgraph_offsets[s] + t;
    for a in 0..buffers.len() {
        for b in a + 1..buffers.len() {
            let (Entry::Tensors(ga), Entry::Tensors(gb)) = (&arena.entries[a], &arena.entries[b])
            else {
                continue;
            };
            if buffers[a].lifetime.overlaps(buffers[b].lifetime)
                && group_of(ga[0]) != group_of(gb[0])
            {
                return (
                    (global(ga[0]), buffers[a].name.clone()),
                    (global(gb[0]), buffers[b].name.clone()),
                );
            }
        }
    }
    panic!("{file}: no two tensors live together")
}

#[test]
fn a_planted_overlap_is_reported_naming_both_tensors() {
    for (file, bytes) in all_models() {
        let model = read_model(&bytes, &file).unwrap();
        let plain = arena(&model, ArenaOptions::default(), &file).unwrap();
        let mut offsets = offline_plan(&model, Sharing::NONE, &TflmGreedy, &file);
        let ((a, name_a), (b, name_b)) = clashing_pair(&model, &plain, &file);
        assert_ne!(offsets[a], offsets[b]);
        offsets[b] = offsets[a];
        let written = with_offline_plan(&bytes, &offsets, &file).unwrap();
        let verdict = check_offline(&read_model(&written, &file).unwrap(), &file)
            .unwrap()
            .unwrap();
        assert!(!verdict.report.is_valid(), "{file}");
        assert_eq!(
            verdict.arena.problem.buffers()[buffer_of(&verdict.arena, a)].name,
            name_a
        );
        let found = verdict.report.violations.iter().any(|v| match v {
            Violation::Overlap {
                a_name,
                b_name,
                addresses,
                ..
            } => {
                *a_name == name_a
                    && *b_name == name_b
                    && addresses.0 == offsets[a] as u64
                    && addresses.1 > addresses.0
            }
            _ => false,
        });
        assert!(
            found,
            "{file}: no overlap of '{name_a}' and '{name_b}' in {:?}",
            verdict.report.violations
        );
        // The message names both.
        let text: Vec<String> = verdict
            .report
            .violations
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(
            text.iter()
                .any(|t| t.contains(&name_a) && t.contains(&name_b)),
            "{text:?}"
        );
    }
}

#[test]
fn a_misaligned_offset_is_reported() {
    for (file, bytes) in all_models() {
        let model = read_model(&bytes, &file).unwrap();
        let mut offsets = offline_plan(&model, Sharing::NONE, &TflmGreedy, &file);
        let t = offsets.iter().position(|&o| o != ONLINE).unwrap();
        offsets[t] = 8;
        let written = with_offline_plan(&bytes, &offsets, &file).unwrap();
        let verdict = check_offline(&read_model(&written, &file).unwrap(), &file)
            .unwrap()
            .unwrap();
        let b = buffer_of(&verdict.arena, t);
        let name = &verdict.arena.problem.buffers()[b].name;
        assert!(
            verdict.report.violations.iter().any(|v| matches!(
                v,
                Violation::Misaligned { name: n, offset: 8, alignment: 16, .. } if n == name
            )),
            "{file}: {:?}",
            verdict.report.violations
        );
        // TFLM takes the offset as it is.
        assert_eq!(verdict.offsets[b], 8);
    }
}

#[test]
fn a_wrong_tensor_count_is_an_offline_plan_error() {
    for (file, bytes) in all_models() {
        let model = read_model(&bytes, &file).unwrap();
        let offsets = offline_plan(&model, Sharing::NONE, &TflmGreedy, &file);
        for wrong in [
            offsets[..offsets.len() - 1].to_vec(),
            [offsets.clone(), vec![ONLINE]].concat(),
            Vec::new(),
        ] {
            let written = with_offline_plan(&bytes, &wrong, &file).unwrap();
            let again = read_model(&written, "wrong.tflite").unwrap();
            let err = check_offline(&again, "wrong.tflite").unwrap_err();
            assert!(
                matches!(&err, TfliteError::OfflinePlan { file, .. } if file == "wrong.tflite"),
                "{err:?}"
            );
            let text = err.to_string();
            assert!(text.contains("wrong.tflite"), "{text}");
            assert!(
                text.contains(&format!(
                    "{} offsets but the model has {} tensors",
                    wrong.len(),
                    offsets.len()
                )),
                "{text}"
            );
            let plain = arena(&model, ArenaOptions::default(), &file).unwrap();
            assert!(matches!(
                tflm_placement(&plain, &wrong, "wrong.tflite"),
                Err(TfliteError::OfflinePlan { .. })
            ));
        }
    }
}

#[test]
fn a_negative_offset_is_an_offline_plan_error_naming_the_tensor() {
    let file = "branchy.tflite";
    let bytes = fixture(file);
    let model = read_model(&bytes, file).unwrap();
    let mut offsets = offline_plan(&model, Sharing::NONE, &TflmGreedy, file);
    let t = model.subgraphs[0]
        .tensors
        .iter()
        .position(|t| t.name == "pool")
        .unwrap();
    offsets[t] = -16;
    let written = with_offline_plan(&bytes, &offsets, file).unwrap();
    let err = check_offline(&read_model(&written, file).unwrap(), "neg.tflite").unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, TfliteError::OfflinePlan { .. }), "{err:?}");
    assert!(
        text.contains("neg.tflite") && text.contains("'pool'") && text.contains("-16"),
        "{text}"
    );
}

#[test]
fn a_short_offline_plan_buffer_is_an_error() {
    let file = "multi_output.tflite";
    let bytes = fixture(file);
    let model = read_model(&bytes, file).unwrap();
    let offsets = offline_plan(&model, Sharing::NONE, &TflmGreedy, file);
    assert_eq!(offsets.len(), 15);
    let written = with_offline_plan(&bytes, &offsets, file).unwrap();
    let unpacked = root_as_model(&written).unwrap().unpack();
    let entry = unpacked
        .metadata
        .as_ref()
        .unwrap()
        .iter()
        .find(|m| m.name.as_deref() == Some(METADATA_NAME))
        .unwrap()
        .buffer as usize;
    for (keep, why) in [
        (8, "holds 8 bytes; it needs at least 12"),
        (20, "declares 15 offsets but its buffer"),
    ] {
        let mut short = unpacked.clone();
        let mut data = offline::encode(&offsets);
        data.truncate(keep);
        short.buffers.as_mut().unwrap()[entry].data = Some(data);
        let again = read_model(&write::pack(&short), "short.tflite").unwrap();
        let err = check_offline(&again, "short.tflite").unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, TfliteError::OfflinePlan { .. }), "{err:?}");
        assert!(
            text.contains("short.tflite") && text.contains(why),
            "{text}"
        );
    }
}

/// A model whose weights are stored after the flatbuffer (`Buffer.offset`/`size`, as
/// converters write models near 2 GB), made from `bytes` by moving every non-empty
/// buffer's data there, each 16-byte aligned.
fn with_weights_after_the_flatbuffer(bytes: &[u8]) -> Vec<u8> {
    let mut model = root_as_model(bytes).unwrap().unpack();
    let mut moved: Vec<(usize, Vec<u8>)> = Vec::new();
    for (i, b) in model.buffers.iter_mut().flatten().enumerate() {
        if let Some(data) = b.data.take().filter(|d| !d.is_empty()) {
            b.offset = u64::MAX; // a placeholder of the final width: set below
            b.size = data.len() as u64;
            moved.push((i, data));
        }
    }
    assert!(!moved.is_empty(), "the fixture has weights");
    let length = write::pack(&model).len();
    let mut at = length.next_multiple_of(16);
    for (i, data) in &moved {
        model.buffers.as_mut().unwrap()[*i].offset = at as u64;
        at = (at + data.len()).next_multiple_of(16);
    }
    let mut out = write::pack(&model);
    assert_eq!(out.len(), length);
    for (i, data) in &moved {
        out.resize(model.buffers.as_ref().unwrap()[*i].offset as usize, 0);
        out.extend_from_slice(data);
    }
    out
}

/// The bytes of every buffer (inline or after the flatbuffer), by index.
fn buffer_bytes(bytes: &[u8]) -> Vec<Vec<u8>> {
    let model = root_as_model(bytes).unwrap().unpack();
    model
        .buffers
        .iter()
        .flatten()
        .map(|b| {
            if b.offset > 1 {
                bytes[b.offset as usize..(b.offset + b.size) as usize].to_vec()
            } else {
                b.data.clone().unwrap_or_default()
            }
        })
        .collect()
}

/// Weights stored after the flatbuffer survive `--write-offline-plan` byte for byte (they
/// were dropped: the offsets pointed past the end of the new file), and the plan reads
/// back.
#[test]
fn weights_after_the_flatbuffer_are_kept() {
    for name in ["branchy.tflite", "mean_tconv.tflite"] {
        let original = with_weights_after_the_flatbuffer(&fixture(name));
        let model = read_model(&original, name).unwrap();
        let offsets = offline_plan(&model, Sharing::NONE, &TflmGreedy, name);
        let written = with_offline_plan(&original, &offsets, name).unwrap();
        let before = buffer_bytes(&original);
        let after = buffer_bytes(&written);
        let plan_buffer = root_as_model(&written)
            .unwrap()
            .metadata()
            .unwrap()
            .iter()
            .find(|m| m.name() == Some(METADATA_NAME))
            .unwrap()
            .buffer() as usize;
        assert!(
            before.iter().any(|b| b.len() > 64),
            "{name}: no weights moved"
        );
        for (i, b) in before.iter().enumerate() {
            if i != plan_buffer {
                assert_eq!(&after[i], b, "{name}: buffer {i} changed");
            }
        }
        assert_aligned(&written, name);
        let again = read_model(&written, name).unwrap();
        assert_eq!(offline::read(&again, name).unwrap(), Some(offsets.clone()));
    }
}

/// A buffer whose data range lies past the end of the file is a clear error naming it.
#[test]
fn weights_past_the_end_of_the_file_are_an_error() {
    let mut original = with_weights_after_the_flatbuffer(&fixture("branchy.tflite"));
    let last_weights = original.len() - 8;
    original.truncate(last_weights);
    let model = read_model(&original, "cut.tflite").unwrap();
    let offsets = offline_plan(&model, Sharing::NONE, &TflmGreedy, "cut.tflite");
    let e = with_offline_plan(&original, &offsets, "cut.tflite").unwrap_err();
    assert!(e.to_string().contains("past the end of the file"), "{e}");
}

/// TFLM reads inline data only: a tensor whose weights are stored after the flatbuffer
/// is planned in the arena, as TFLM plans it, and the arena names every such tensor as a
/// caveat. (python/tests/test_tflm.py holds the head to TFLM's own on the same models.)
#[test]
fn weights_after_the_flatbuffer_are_arena_tensors_for_tflm_and_a_caveat() {
    for name in ["branchy.tflite", "mean_tconv.tflite"] {
        let inline = read_model(&fixture(name), name).unwrap();
        let moved = read_model(&with_weights_after_the_flatbuffer(&fixture(name)), name).unwrap();
        let options = ArenaOptions::default();
        let before = arena(&inline, options, name).unwrap();
        let after = arena(&moved, options, name).unwrap();
        assert!(before.caveats.is_empty(), "{name}: {:?}", before.caveats);
        let constants: Vec<(usize, usize)> = inline
            .subgraphs
            .iter()
            .enumerate()
            .flat_map(|(s, sg)| {
                sg.tensors
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| inline.buffers[t.buffer].has_data())
                    .map(move |(t, _)| (s, t))
            })
            .collect();
        assert!(!constants.is_empty(), "{name}");
        let [memplan_tflite::TflmCaveat::DataAfterFlatbuffer(listed)] = after.caveats.as_slice()
        else {
            panic!("{name}: {:?}", after.caveats);
        };
        let listed: Vec<(usize, usize)> = listed.iter().map(|&(s, t, _)| (s, t)).collect();
        assert_eq!(listed, constants, "{name}");
        // Every moved constant is now an arena tensor of its own.
        let placed: Vec<(usize, usize)> = after
            .entries
            .iter()
            .filter_map(|e| match e {
                Entry::Tensors(g) => Some(g.clone()),
                Entry::Scratch(_) => None,
            })
            .flatten()
            .collect();
        for c in &constants {
            assert!(placed.contains(c), "{name}: {c:?} is not in the arena");
        }
        let head = |a: &Arena| TflmGreedy.plan(&a.problem).unwrap().arena_bytes.unwrap();
        assert!(head(&after) > head(&before), "{name}");
        let plan = TflmGreedy.plan(&after.problem).unwrap();
        assert!(check(&after.problem, &plan).is_valid(), "{name}");
    }
}

/// An operator output with a dimension of 0 or less is a caveat (TFLM refuses it as a
/// dynamic tensor); TFLM's legacy scalar shape `[0]` is not.
#[test]
fn dynamic_outputs_are_a_caveat() {
    let bytes = fixture("branchy.tflite");
    let model = root_as_model(&bytes).unwrap().unpack();
    let sg = &model.subgraphs.as_ref().unwrap()[0];
    let out = sg.operators.as_ref().unwrap()[0].outputs.as_ref().unwrap()[0] as usize;
    let shape = sg.tensors.as_ref().unwrap()[out].shape.clone().unwrap();
    for (changed, caveat) in [
        (vec![0], false),
        ([vec![0], shape[1..].to_vec()].concat(), true),
        ([vec![-1], shape[1..].to_vec()].concat(), true),
    ] {
        let mut m = model.clone();
        m.subgraphs.as_mut().unwrap()[0].tensors.as_mut().unwrap()[out].shape =
            Some(changed.clone());
        let written = write::pack(&m);
        let read = match read_model(&written, "dyn.tflite") {
            Ok(read) => read,
            // A negative dimension may be refused by the reader itself: also not silent.
            Err(e) => {
                assert!(changed.iter().any(|&d| d < 0), "{changed:?}: {e}");
                continue;
            }
        };
        let a = arena(&read, ArenaOptions::default(), "dyn.tflite").unwrap();
        let found = a.caveats.iter().any(|c| {
            matches!(c, memplan_tflite::TflmCaveat::DynamicOutput { operator: 0, tensor, .. } if *tensor == out)
        });
        assert_eq!(found, caveat, "{changed:?}: {:?}", a.caveats);
    }
}
