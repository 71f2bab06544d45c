//! The reader and the arena problem on the fixtures in `tests/data/`: what their README
//! says of them (tensor and operator counts, operators, TFLM heads), TFLM's lifetime rules,
//! kernel scratch buffers, what is planned and what is not, and storage sharing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use memplan::checker::check;
use memplan::planner::{by_name, Planner, TflmGreedy};
use memplan::Problem;
use memplan_tflite::arena::{lifetimes, ARENA_ALIGNMENT};
use memplan_tflite::model::BuiltinOperator;
use memplan_tflite::scratch::ScratchRequest;
use memplan_tflite::{arena, read_file, Arena, ArenaOptions, Entry, Model, Sharing, TfliteError};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn fixture(name: &str) -> (Model, String) {
    let path = data_dir().join(name);
    let model = read_file(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    (model, name.to_string())
}

/// Every `.tflite` in `tests/data/`, sorted.
fn fixture_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(data_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tflite"))
        .collect();
    names.sort();
    names
}

/// One row of the README's fixture table.
struct ReadmeRow {
    ops: usize,
    tensors: usize,
    what: String,
}

/// The README's two tables: fixtures (file → ops, tensors, description) and arena sizes
/// (file → TFLM head).
fn readme() -> (BTreeMap<String, ReadmeRow>, BTreeMap<String, u64>) {
    let text = std::fs::read_to_string(data_dir().join("README.md")).unwrap();
    let mut fixtures = BTreeMap::new();
    let mut heads = BTreeMap::new();
    let mut table = "";
    for line in text.lines() {
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        if !line.trim_start().starts_with('|') {
            table = "";
            continue;
        }
        match cells.first().copied() {
            Some("file") if cells.get(1) == Some(&"ops") => table = "fixtures",
            Some("file") if cells.last() == Some(&"TFLM head") => table = "heads",
            Some(first) if first.starts_with('`') => {
                let file = first.trim_matches('`').to_string();
                let number = |i: usize| -> u64 {
                    cells[i]
                        .replace(',', "")
                        .parse()
                        .unwrap_or_else(|_| panic!("README row {line:?}: cell {i}"))
                };
                match table {
                    "fixtures" => {
                        let row = ReadmeRow {
                            ops: number(1) as usize,
                            tensors: number(2) as usize,
                            what: cells[3].to_string(),
                        };
                        assert!(fixtures.insert(file, row).is_none(), "{line}");
                    }
                    "heads" => {
                        assert!(heads.insert(file, number(3)).is_none(), "{line}");
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    assert!(
        !fixtures.is_empty() && !heads.is_empty(),
        "README tables not found"
    );
    (fixtures, heads)
}

/// The operators of the fixtures the README describes, in execution order.
fn expected_operators(name: &str) -> Option<Vec<BuiltinOperator>> {
    use BuiltinOperator as B;
    Some(match name {
        "branchy.tflite" => vec![
            B::CONV_2D,
            B::CONV_2D,
            B::MAX_POOL_2D,
            B::CONV_2D,
            B::CONV_2D,
            B::DEPTHWISE_CONV_2D,
            B::CONV_2D,
            B::ADD,
            B::MAX_POOL_2D,
            B::AVERAGE_POOL_2D,
            B::CONCATENATION,
            B::RESHAPE,
            B::FULLY_CONNECTED,
            B::SOFTMAX,
        ],
        "elementwise.tflite" => vec![
            B::RELU,
            B::ADD,
            B::LOGISTIC,
            B::MUL,
            B::RESHAPE,
            B::TANH,
            B::SUB,
            B::QUANTIZE,
            B::MUL,
        ],
        "mean_tconv.tflite" => vec![B::CONV_2D, B::TRANSPOSE_CONV, B::MEAN, B::CONV_2D],
        "multi_output.tflite" => vec![
            B::CONV_2D,
            B::DEPTHWISE_CONV_2D,
            B::AVERAGE_POOL_2D,
            B::CONV_2D,
            B::CONV_2D,
            B::ADD,
        ],
        "equal_sizes.tflite" => vec![
            B::CONV_2D,
            B::DEPTHWISE_CONV_2D,
            B::DEPTHWISE_CONV_2D,
            B::CONV_2D,
            B::ADD,
            B::ADD,
            B::ADD,
            B::CONV_2D,
            B::DEPTHWISE_CONV_2D,
            B::ADD,
        ],
        _ => return None,
    })
}

/// The five fixtures this file knows in detail.
const KNOWN: &[&str] = &[
    "branchy.tflite",
    "elementwise.tflite",
    "mean_tconv.tflite",
    "multi_output.tflite",
    "equal_sizes.tflite",
];

/// Operator names (`CONV_2D`) a README description mentions.
fn mentioned_operators(what: &str) -> BTreeSet<String> {
    what.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| {
            w.len() > 2
                && w.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        })
        .filter(|w| {
            BuiltinOperator::ENUM_VALUES
                .iter()
                .any(|op| op.variant_name() == Some(w))
        })
        .map(str::to_string)
        .collect()
}

fn planned_checked(problem: &Problem, planner: &dyn Planner) -> memplan::Plan {
    let plan = planner.plan(problem).unwrap();
    let report = check(problem, &plan);
    assert!(
        report.is_valid(),
        "{}: {:?}",
        planner.name(),
        report.violations
    );
    assert_eq!(plan.arena_bytes, report.arena_bytes);
    plan
}

/// Each buffer's `(name, (start, end))` by name.
fn lifetimes_by_name(arena: &Arena) -> BTreeMap<String, (u64, u64)> {
    arena
        .problem
        .buffers()
        .iter()
        .map(|b| (b.name.clone(), (b.lifetime.start, b.lifetime.end)))
        .collect()
}

fn tensor_groups(arena: &Arena) -> Vec<Vec<usize>> {
    arena
        .entries
        .iter()
        .filter_map(|e| match e {
            Entry::Tensors(t) => Some(
                t.iter()
                    .map(|&(s, t)| {
                        assert_eq!(s, 0);
                        t
                    })
                    .collect(),
            ),
            Entry::Scratch(_) => None,
        })
        .collect()
}

#[test]
fn fixtures_match_the_readme() {
    let (rows, _) = readme();
    let files: BTreeSet<String> = fixture_names().into_iter().collect();
    let listed: BTreeSet<String> = rows.keys().cloned().collect();
    assert_eq!(
        files, listed,
        "the .tflite files in tests/data and the README's table"
    );
    for known in KNOWN {
        assert!(files.contains(*known), "{known} is missing");
    }
    for (name, row) in &rows {
        let (model, _) = fixture(name);
        assert_eq!(model.version, 3, "{name}");
        assert_eq!(model.subgraphs.len(), 1, "{name}");
        let sg = &model.subgraphs[0];
        assert_eq!(sg.name, "main", "{name}");
        assert_eq!(sg.operators.len(), row.ops, "{name}: operators");
        assert_eq!(sg.tensors.len(), row.tensors, "{name}: tensors");
        // Converter conventions: buffer 0 empty, one buffer per tensor.
        assert_eq!(model.buffers[0].data_len, 0, "{name}");
        assert!(!model.buffers[0].external, "{name}");
        let buffers: BTreeSet<usize> = sg.tensors.iter().map(|t| t.buffer).collect();
        assert_eq!(
            buffers.len(),
            sg.tensors.len(),
            "{name}: one buffer per tensor"
        );
        assert!(
            model
                .metadata
                .iter()
                .all(|m| m.name != "OfflineMemoryAllocation"),
            "{name}"
        );
        let used: BTreeSet<String> = sg
            .operators
            .iter()
            .map(|op| op.opcode.variant_name().unwrap().to_string())
            .collect();
        for op in mentioned_operators(&row.what) {
            assert!(
                used.contains(&op),
                "{name}: the README mentions {op}, the model has {used:?}"
            );
        }
        if let Some(expected) = expected_operators(name) {
            let actual: Vec<BuiltinOperator> = sg.operators.iter().map(|op| op.opcode).collect();
            assert_eq!(actual, expected, "{name}: operators");
        }
        // Activations are int8; the tensors TFLM plans (no data, not variables) all are.
        for t in &sg.tensors {
            if !model.buffers[t.buffer].has_data() {
                assert_eq!(
                    t.dtype,
                    memplan_tflite::model::TensorType::INT8,
                    "{name}: {}",
                    t.name
                );
            }
            assert!(!t.is_variable, "{name}: {}", t.name);
        }
    }
}

#[test]
fn tflm_greedy_gives_the_readme_tflm_heads() {
    let (_, heads) = readme();
    for known in KNOWN {
        assert!(
            heads.contains_key(*known),
            "README has no TFLM head for {known}"
        );
    }
    for (name, &head) in &heads {
        let (model, file) = fixture(name);
        let arena = arena(&model, ArenaOptions::default(), &file).unwrap();
        assert!(
            arena.unmodelled.is_empty(),
            "{name}: {:?}",
            arena.unmodelled
        );
        let plan = planned_checked(&arena.problem, &TflmGreedy);
        assert_eq!(
            plan.arena_bytes,
            Some(head),
            "{name}: tflm-greedy vs TFLM's head"
        );
        let best = planned_checked(&arena.problem, by_name("best-of").unwrap());
        assert!(best.arena_bytes.unwrap() <= head, "{name}");
    }
}

#[test]
fn every_planned_size_is_a_multiple_of_16_and_no_constant_is_planned() {
    for name in fixture_names() {
        let (model, file) = fixture(&name);
        for sharing in [Sharing::NONE, Sharing::ALL] {
            let options = ArenaOptions {
                sharing,
                ..ArenaOptions::default()
            };
            let arena = arena(&model, options, &file).unwrap();
            assert_eq!(arena.entries.len(), arena.problem.len(), "{name}");
            assert_eq!(
                arena.tensor_count,
                model.subgraphs[0].tensors.len(),
                "{name}"
            );
            assert_eq!(arena.subgraph_offsets, vec![0], "{name}");
            assert!(arena.offline.is_none(), "{name}");
            for (b, entry) in arena.problem.buffers().iter().zip(&arena.entries) {
                assert!(
                    b.size > 0 && b.size % ARENA_ALIGNMENT == 0,
                    "{name}: {} is {} bytes",
                    b.name,
                    b.size
                );
                assert_eq!(b.alignment, ARENA_ALIGNMENT, "{name}: {}", b.name);
                assert_eq!(b.fixed_offset, None, "{name}: {}", b.name);
                let expected = match entry {
                    Entry::Tensors(group) => {
                        for &(s, t) in group {
                            let tensor = &model.subgraphs[s].tensors[t];
                            assert!(
                                !model.buffers[tensor.buffer].has_data(),
                                "{name}: constant {} is planned",
                                tensor.name
                            );
                            assert!(tensor.bytes > 0, "{name}: {}", tensor.name);
                        }
                        group
                            .iter()
                            .map(|&(s, t)| model.subgraphs[s].tensors[t].bytes)
                            .max()
                            .unwrap()
                    }
                    Entry::Scratch(r) => r.bytes,
                };
                assert_eq!(b.size, expected.next_multiple_of(16), "{name}: {}", b.name);
            }
            // Every tensor without data is planned, once.
            let mut seen = BTreeSet::new();
            for entry in &arena.entries {
                if let Entry::Tensors(group) = entry {
                    for &st in group {
                        assert!(seen.insert(st), "{name}: {st:?} planned twice");
                    }
                }
            }
            let sg = &model.subgraphs[0];
            let activations: BTreeSet<(usize, usize)> = (0..sg.tensors.len())
                .filter(|&t| !model.buffers[sg.tensors[t].buffer].has_data())
                .map(|t| (0, t))
                .collect();
            assert_eq!(seen, activations, "{name}");
            planned_checked(&arena.problem, &TflmGreedy);
        }
    }
}

#[test]
fn multi_output_lifetimes_follow_tflm() {
    let (model, file) = fixture("multi_output.tflite");
    let sg = &model.subgraphs[0];
    let index = |name: &str| sg.tensors.iter().position(|t| t.name == name).unwrap();
    // Two outputs, `add` (op 5) and `stem` (op 0); the input is read by op 0 and op 4.
    assert_eq!(sg.outputs, vec![index("add"), index("stem")]);
    assert_eq!(sg.inputs, vec![index("input")]);
    assert_eq!(sg.operators[0].outputs, vec![index("stem")]);
    assert_eq!(sg.operators[2].outputs, vec![index("stem_pool")]);
    assert_eq!(sg.operators[4].inputs[0], Some(index("input")));
    let readers = |t: usize| {
        sg.operators
            .iter()
            .filter(|op| op.inputs.contains(&Some(t)))
            .count()
    };
    assert_eq!(readers(index("stem_pool")), 0, "stem_pool is never read");

    // In TFLM's allocation scopes: inputs at 0, operator k opens scope k + 1.
    let scopes = lifetimes(&model, &[], &file).unwrap();
    assert_eq!(scopes.last_scope, 6);
    let s = |name: &str| {
        let l = scopes.tensors[0][index(name)];
        (l.first, l.last)
    };
    assert_eq!(s("input"), (0, 5), "the input lives to op 4");
    assert_eq!(s("stem"), (1, 6), "an output lives to the last scope");
    assert_eq!(s("add"), (6, 6));
    assert_eq!(
        s("stem_pool"),
        (3, 3),
        "never read: its producing scope only"
    );
    assert_eq!(s("dw"), (2, 4));
    assert_eq!(s("body"), (4, 6));
    assert_eq!(s("skip"), (5, 6));
    // Constants are never reached as anything but operator inputs.
    assert_eq!(s("stem/weights"), (-1, 1));

    // As steps: scope s is step s + 1, lifetimes half-open. Operator k runs at step k + 2.
    let step = |op: u64| op + 2;
    let arena = arena(&model, ArenaOptions::default(), &file).unwrap();
    assert_eq!(arena.last_scope, 6);
    let lives = lifetimes_by_name(&arena);
    let last_step = step(5);
    assert_eq!(lives["input"], (1, step(4) + 1));
    assert_eq!(lives["stem"], (step(0), last_step + 1));
    assert_eq!(lives["add"], (step(5), last_step + 1));
    assert_eq!(lives["stem_pool"], (step(2), step(2) + 1));
    assert_eq!(lives["dw"], (step(1), step(3) + 1));
    assert_eq!(lives["body"], (step(3), step(5) + 1));
    assert_eq!(lives["skip"], (step(4), step(5) + 1));
    assert_eq!(lives.len(), 7, "{lives:?}");
    assert!(!lives
        .keys()
        .any(|n| n.contains("weights") || n.contains("bias")));
    let plan = planned_checked(&arena.problem, &TflmGreedy);
    assert_eq!(plan.arena_bytes, Some(2304));
}

#[test]
fn every_fixture_lifetime_ends_at_the_last_reader() {
    // The general rule on every fixture: a planned tensor lives from its producer (step 1
    // for a subgraph input) to its last reader, or to the last step for an output.
    for name in fixture_names() {
        let (model, file) = fixture(&name);
        let sg = &model.subgraphs[0];
        let arena = arena(
            &model,
            ArenaOptions {
                scratch: false,
                ..ArenaOptions::default()
            },
            &file,
        )
        .unwrap();
        let last_step = sg.operators.len() as u64 + 1;
        for (b, entry) in arena.problem.buffers().iter().zip(&arena.entries) {
            let Entry::Tensors(group) = entry else {
                panic!("{name}: scratch with scratch off")
            };
            let [(0, t)] = group[..] else {
                panic!("{name}: {group:?}")
            };
            let producer = sg.operators.iter().position(|op| op.outputs.contains(&t));
            let start = match producer {
                Some(k) => k as u64 + 2,
                None => {
                    assert!(sg.inputs.contains(&t), "{name}: {} has no producer", b.name);
                    1
                }
            };
            let mut last = start;
            for (k, op) in sg.operators.iter().enumerate() {
                if op.inputs.contains(&Some(t)) {
                    last = last.max(k as u64 + 2);
                }
            }
            if sg.outputs.contains(&t) {
                last = last_step;
            }
            assert_eq!(
                (b.lifetime.start, b.lifetime.end),
                (start, last + 1),
                "{name}: {}",
                b.name
            );
        }
    }
}

#[test]
fn mean_tconv_scratch_buffers() {
    let (model, file) = fixture("mean_tconv.tflite");
    let sg = &model.subgraphs[0];
    let elements = |t: usize| {
        sg.tensors[t]
            .shape
            .iter()
            .map(|&d| d as u64)
            .product::<u64>()
    };
    let tconv = &sg.operators[1];
    let mean = &sg.operators[2];
    assert_eq!(tconv.opcode, BuiltinOperator::TRANSPOSE_CONV);
    assert_eq!(mean.opcode, BuiltinOperator::MEAN);
    assert!(mean.options.keep_dims);
    let tconv_out = elements(tconv.outputs[0]);
    assert_eq!(tconv_out, 16 * 16 * 4);
    let mean_input = mean.inputs[0].unwrap();
    let axes = mean.inputs[1].unwrap();
    assert_eq!(sg.tensors[axes].name, "mean/axes");
    assert_eq!(
        sg.tensors[mean_input].dtype,
        memplan_tflite::model::TensorType::INT8
    );

    let arena = arena(&model, ArenaOptions::default(), &file).unwrap();
    assert!(arena.unmodelled.is_empty());
    let scratch: Vec<(&ScratchRequest, &memplan::Buffer)> = arena
        .entries
        .iter()
        .zip(arena.problem.buffers())
        .filter_map(|(e, b)| match e {
            Entry::Scratch(r) => Some((r, b)),
            Entry::Tensors(_) => None,
        })
        .collect();
    // The table in src/scratch.rs: TRANSPOSE_CONV with int8 input, 4·elements(output);
    // MEAN with int8 input, 4·elements(output), 4·rank(input), 4·elements(axis).
    let expected: Vec<(usize, usize, u64)> = vec![
        (1, 0, 4 * tconv_out),
        (2, 0, 4 * elements(mean.outputs[0])),
        (2, 1, 4 * sg.tensors[mean_input].shape.len() as u64),
        (2, 2, 4 * elements(axes)),
    ];
    assert_eq!(
        expected,
        vec![(1, 0, 4096), (2, 0, 16), (2, 1, 16), (2, 2, 8)]
    );
    let actual: Vec<(usize, usize, u64)> = scratch
        .iter()
        .map(|(r, _)| (r.operator, r.index, r.bytes))
        .collect();
    assert_eq!(actual, expected);
    let names: Vec<&str> = scratch.iter().map(|(_, b)| b.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "scratch:TRANSPOSE_CONV@1#0",
            "scratch:MEAN@2#0",
            "scratch:MEAN@2#1",
            "scratch:MEAN@2#2"
        ]
    );
    for (r, b) in &scratch {
        assert_eq!(r.subgraph, 0);
        assert_eq!(b.size, r.bytes.next_multiple_of(16));
        // Live during its operator only: operator k runs at step k + 2.
        let step = r.operator as u64 + 2;
        assert_eq!(
            (b.lifetime.start, b.lifetime.end),
            (step, step + 1),
            "{}",
            b.name
        );
    }
    // Scratch buffers come after every tensor, in request order.
    let first_scratch = arena
        .entries
        .iter()
        .position(|e| matches!(e, Entry::Scratch(_)))
        .unwrap();
    assert_eq!(first_scratch, arena.entries.len() - 4);

    // The int32 constants are not planned; nothing int32 is.
    let planned: BTreeSet<usize> = tensor_groups(&arena).into_iter().flatten().collect();
    for constant in ["tconv/output_shape", "mean/axes"] {
        let t = sg.tensors.iter().position(|t| t.name == constant).unwrap();
        assert_eq!(
            sg.tensors[t].dtype,
            memplan_tflite::model::TensorType::INT32
        );
        assert!(model.buffers[sg.tensors[t].buffer].has_data(), "{constant}");
        assert!(!planned.contains(&t), "{constant} is planned");
    }
    assert!(planned
        .iter()
        .all(|&t| sg.tensors[t].dtype != memplan_tflite::model::TensorType::INT32));
    assert_eq!(planned.len(), 5);

    let plan = planned_checked(&arena.problem, &TflmGreedy);
    assert_eq!(
        plan.arena_bytes,
        Some(5632),
        "TFLM's head with its 4096-byte scratch"
    );

    // Without scratch modelling the arena is the tensors' only.
    let bare = memplan_tflite::arena(
        &model,
        ArenaOptions {
            scratch: false,
            ..ArenaOptions::default()
        },
        &file,
    )
    .unwrap();
    assert!(bare.entries.iter().all(|e| matches!(e, Entry::Tensors(_))));
    assert_eq!(bare.problem.len(), arena.problem.len() - 4);
    let plan = planned_checked(&bare.problem, &TflmGreedy);
    assert!(plan.arena_bytes.unwrap() < 5632);
}

#[test]
fn sharing_merges_reshape_and_in_place_outputs_on_elementwise() {
    let (model, file) = fixture("elementwise.tflite");
    let sg = &model.subgraphs[0];
    let names: Vec<&str> = sg.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "input",
            "relu",
            "add",
            "logistic",
            "mul",
            "reshape/shape",
            "reshape",
            "tanh",
            "sub",
            "requantize",
            "mul_out"
        ]
    );
    let build = |sharing: Sharing| {
        let arena = arena(
            &model,
            ArenaOptions {
                sharing,
                ..ArenaOptions::default()
            },
            &file,
        )
        .unwrap();
        planned_checked(&arena.problem, &TflmGreedy);
        planned_checked(&arena.problem, by_name("best-of").unwrap());
        arena
    };

    // NONE: every activation its own buffer (all but the constant reshape/shape).
    let none = build(Sharing::NONE);
    assert_eq!(
        tensor_groups(&none),
        [0, 1, 2, 3, 4, 6, 7, 8, 9, 10].map(|t| vec![t]).to_vec()
    );

    // RESHAPE only: `reshape` (6) on its data input `mul` (4).
    let reshape = build(Sharing {
        reshape: true,
        inplace: false,
    });
    assert_eq!(
        tensor_groups(&reshape),
        vec![
            vec![0],
            vec![1],
            vec![2],
            vec![3],
            vec![4, 6],
            vec![7],
            vec![8],
            vec![9],
            vec![10]
        ]
    );

    // In place only: ADD (2) over `input` (0), dying at it; LOGISTIC (3) over `add`; MUL (4)
    // over `logistic` (its first input of the same shape and type that dies at it). Not
    // RELU (1): its input is read again by ADD. Not RESHAPE. Not TANH (7): its input is
    // read again by SUB. SUB (8) over `reshape` (6), QUANTIZE (9) over `sub`, MUL (10)
    // over `requantize` (9), not over `tanh` (7), which lives on.
    let inplace = build(Sharing {
        reshape: false,
        inplace: true,
    });
    assert_eq!(
        tensor_groups(&inplace),
        vec![vec![0, 2, 3, 4], vec![1], vec![6, 8, 9, 10], vec![7]]
    );

    // ALL: the RESHAPE joins both chains into one buffer.
    let all = build(Sharing::ALL);
    assert_eq!(
        tensor_groups(&all),
        vec![vec![0, 2, 3, 4, 6, 8, 9, 10], vec![1], vec![7]]
    );
    // A group's buffer lives from its first tensor's start to its last tensor's end, and
    // is as large as its largest tensor.
    let lives = lifetimes_by_name(&none);
    let merged = &all.problem.buffers()[0];
    assert_eq!(merged.name, "input");
    assert_eq!(
        (merged.lifetime.start, merged.lifetime.end),
        (lives["input"].0, lives["mul_out"].1)
    );
    assert_eq!(merged.size, 512);
    assert_eq!(lifetimes_by_name(&all)["relu"], lives["relu"]);
    assert_eq!(lifetimes_by_name(&all)["tanh"], lives["tanh"]);
    // relu [2, 6) and tanh [7, 11) never meet: TFLM's planner needs two 512-byte slots.
    assert_eq!(
        TflmGreedy.plan(&all.problem).unwrap().arena_bytes,
        Some(1024)
    );
    assert_eq!(
        TflmGreedy.plan(&none.problem).unwrap().arena_bytes,
        Some(1536)
    );
}

#[test]
fn sharing_on_branchy_aliases_the_flatten_and_adds_in_place() {
    let (model, file) = fixture("branchy.tflite");
    let sg = &model.subgraphs[0];
    let index = |name: &str| sg.tensors.iter().position(|t| t.name == name).unwrap();
    let all = arena(
        &model,
        ArenaOptions {
            sharing: Sharing::ALL,
            ..ArenaOptions::default()
        },
        &file,
    )
    .unwrap();
    let merged: Vec<Vec<usize>> = tensor_groups(&all)
        .into_iter()
        .filter(|g| g.len() > 1)
        .collect();
    assert_eq!(
        merged,
        vec![
            vec![index("down"), index("block/add")],
            vec![index("branch/concat"), index("head/flatten")],
        ]
    );
    planned_checked(&all.problem, &TflmGreedy);
}

#[test]
fn a_missing_file_is_an_error_naming_it() {
    let path = data_dir().join("no_such_model.tflite");
    let err = read_file(&path).unwrap_err();
    assert!(matches!(err, TfliteError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("no_such_model.tflite"), "{err}");
}
