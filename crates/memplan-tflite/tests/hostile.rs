//! Hostile input: truncated and corrupted files, wrong identifiers, empty files, indices
//! out of range, impossible shapes and subgraphs that run themselves. Each is an error
//! naming the file (and the tensor or operator at fault), never a panic; the fuzz target's
//! logic (`fuzzing::tflite_reader`) runs on every mutated input too.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use memplan::planner::{Planner, TflmGreedy};
use memplan_tflite::fuzzing::tflite_reader;
use memplan_tflite::schema_generated::tflite as fb;
use memplan_tflite::write::pack;
use memplan_tflite::{arena, offline_offsets, read_file, read_model, ArenaOptions, TfliteError};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(data_dir().join(name)).unwrap()
}

/// Reads `bytes` as `file` and, whatever the answer, runs the fuzz target's logic on them;
/// a panic in either fails the test naming `what`. Returns the reader's answer.
fn read_hostile(
    bytes: &[u8],
    file: &str,
    what: &str,
) -> Result<memplan_tflite::Model, TfliteError> {
    let result = catch_unwind(|| read_model(bytes, file))
        .unwrap_or_else(|_| panic!("read_model panicked on {what}"));
    if let Err(e) = &result {
        let text = e.to_string();
        assert!(
            text.contains(file),
            "{what}: the error does not name '{file}': {text}"
        );
    }
    catch_unwind(AssertUnwindSafe(|| tflite_reader(bytes)))
        .unwrap_or_else(|_| panic!("fuzzing::tflite_reader panicked on {what}"));
    result
}

/// The reader's error on `bytes`, which must not read.
fn read_error(bytes: &[u8], file: &str, what: &str) -> TfliteError {
    match read_hostile(bytes, file, what) {
        Ok(_) => panic!("{what}: read without error"),
        Err(e) => e,
    }
}

/// A tiny deterministic generator (Knuth's MMIX LCG), so that no random crate is needed.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn every_truncation_is_an_error() {
    for (name, step) in [
        ("elementwise.tflite", 1),
        ("mean_tconv.tflite", 3),
        ("branchy.tflite", 13),
    ] {
        let bytes = fixture(name);
        assert!(read_model(&bytes, name).is_ok());
        for len in (0..bytes.len()).step_by(step) {
            let file = format!("{name}[..{len}]");
            let err = read_error(&bytes[..len], &file, &file);
            assert!(
                matches!(err, TfliteError::NotTflite { .. }),
                "{file}: {err:?}"
            );
            // Past the identifier, the message says what happened in words a user can
            // act on, not only the verifier's.
            if len >= 8 {
                let text = err.to_string();
                assert!(
                    text.contains("truncated") || text.contains("export the model again"),
                    "{file}: {text}"
                );
            }
        }
    }
}

#[test]
fn flipped_bytes_never_panic() {
    let bytes = fixture("elementwise.tflite");
    let mut errors = 0;
    let mut reads = 0;
    for at in 0..bytes.len() {
        for mask in [0x01u8, 0x80, 0xff] {
            let mut bad = bytes.clone();
            bad[at] ^= mask;
            let what = format!("elementwise.tflite with byte {at} ^ {mask:#04x}");
            match read_hostile(&bad, "flipped.tflite", &what) {
                Ok(_) => reads += 1,
                Err(_) => errors += 1,
            }
        }
    }
    // Many flips land in weights or names and still read; many break the flatbuffer.
    assert!(
        errors > 100 && reads > 100,
        "{errors} errors, {reads} reads"
    );
    // The header's bytes always matter: the root offset and the identifier.
    for at in 0..8 {
        let mut bad = bytes.clone();
        bad[at] ^= 0x80;
        read_error(&bad, "header.tflite", &format!("header byte {at}"));
    }
}

#[test]
fn random_corruption_never_panics() {
    let mut rng = Lcg(0x5eed);
    let (mut reads, mut errors) = (0, 0);
    for name in [
        "branchy.tflite",
        "mean_tconv.tflite",
        "multi_output.tflite",
        "equal_sizes.tflite",
    ] {
        let bytes = fixture(name);
        for round in 0..1500 {
            let mut bad = bytes.clone();
            let changes = 1 + rng.below(8);
            for _ in 0..changes {
                let at = rng.below(bad.len());
                bad[at] = match rng.below(4) {
                    0 => 0,
                    1 => 0xff,
                    2 => bad[at].wrapping_add(1),
                    _ => rng.next() as u8,
                };
            }
            if round % 10 == 0 {
                // Sometimes cut it short or stretch it as well.
                let len = rng.below(bad.len() + 64);
                bad.resize(len, 0);
            }
            match read_hostile(&bad, "corrupt.tflite", &format!("{name} round {round}")) {
                Ok(_) => reads += 1,
                Err(_) => errors += 1,
            }
        }
    }
    // Both outcomes occur, so the loop exercises the reader and what follows it.
    assert!(
        errors > 500 && reads > 500,
        "{errors} errors, {reads} reads"
    );
}

#[test]
fn a_wrong_identifier_is_an_error() {
    let mut bytes = fixture("elementwise.tflite");
    assert_eq!(&bytes[4..8], b"TFL3");
    bytes[4..8].copy_from_slice(b"TFL2");
    let err = read_error(&bytes, "ident.tflite", "identifier TFL2");
    assert!(matches!(err, TfliteError::NotTflite { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("ident.tflite") && text.contains("TFL2"),
        "{text}"
    );
    // An ONNX-ish or text file: no identifier at all.
    let err = read_error(b"id,lower,upper,size\nb0,0,1,16\n", "problem.csv", "a CSV");
    assert!(err.to_string().contains("not a TFLite model"), "{err}");
}

#[test]
fn an_empty_file_is_an_error() {
    let err = read_error(&[], "empty.tflite", "no bytes");
    let text = err.to_string();
    assert!(
        text.contains("empty.tflite") && text.contains("0 bytes"),
        "{text}"
    );
    // The same from disk, naming the path.
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hostile-empty.tflite");
    std::fs::write(&path, []).unwrap();
    let err = read_file(&path).unwrap_err();
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
    // A missing file.
    let missing = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hostile-missing.tflite");
    let err = read_file(&missing).unwrap_err();
    assert!(matches!(err, TfliteError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("hostile-missing.tflite"), "{err}");
}

/// A fixture unpacked into the generated object API.
fn unpacked(name: &str) -> fb::ModelT {
    let bytes = fixture(name);
    fb::root_as_model(&bytes).unwrap().unpack()
}

fn subgraph(model: &mut fb::ModelT, s: usize) -> &mut fb::SubGraphT {
    &mut model.subgraphs.as_mut().unwrap()[s]
}

fn operator(model: &mut fb::ModelT, o: usize) -> &mut fb::OperatorT {
    &mut subgraph(model, 0).operators.as_mut().unwrap()[o]
}

/// Packs `model`, reads it as `file` and returns the error text, which must name the file
/// and contain every one of `parts`.
fn invalid(model: &fb::ModelT, file: &str, parts: &[&str]) -> String {
    let bytes = pack(model);
    let err = read_error(&bytes, file, file);
    let text = err.to_string();
    assert!(text.contains(file), "{text}");
    for part in parts {
        assert!(text.contains(part), "'{part}' not in: {text}");
    }
    text
}

#[test]
fn a_tensor_index_out_of_range_is_an_error_naming_the_operator() {
    // elementwise.tflite: 11 tensors; operator 1 is ADD(input, relu) -> add.
    let mut m = unpacked("elementwise.tflite");
    operator(&mut m, 1).inputs = Some(vec![0, 99]);
    invalid(
        &m,
        "in.tflite",
        &["operator 1 (ADD) input 1", "tensor 99", "11 tensors"],
    );

    let mut m = unpacked("elementwise.tflite");
    operator(&mut m, 2).outputs = Some(vec![11]);
    invalid(
        &m,
        "out.tflite",
        &["operator 2 (LOGISTIC) output 0", "tensor 11"],
    );

    let mut m = unpacked("elementwise.tflite");
    operator(&mut m, 3).outputs = Some(vec![-1]);
    invalid(
        &m,
        "neg.tflite",
        &["operator 3 (MUL) output 0", "tensor -1"],
    );

    let mut m = unpacked("elementwise.tflite");
    operator(&mut m, 0).intermediates = Some(vec![1, 12345]);
    invalid(
        &m,
        "mid.tflite",
        &["operator 0 (RELU) intermediate 1", "tensor 12345"],
    );

    let mut m = unpacked("elementwise.tflite");
    subgraph(&mut m, 0).inputs = Some(vec![i32::MAX]);
    invalid(
        &m,
        "sgin.tflite",
        &["subgraph 0", "input 0", &format!("tensor {}", i32::MAX)],
    );

    let mut m = unpacked("elementwise.tflite");
    subgraph(&mut m, 0).outputs = Some(vec![10, 11]);
    invalid(&m, "sgout.tflite", &["subgraph 0", "output 1", "tensor 11"]);

    // An omitted optional input (-1) is no error.
    let mut m = unpacked("elementwise.tflite");
    operator(&mut m, 1).inputs = Some(vec![0, -1]);
    let model = read_hostile(&pack(&m), "optional.tflite", "an omitted input").unwrap();
    assert_eq!(model.subgraphs[0].operators[1].inputs, vec![Some(0), None]);
}

#[test]
fn a_non_empty_intermediate_is_refused_naming_the_operator_and_tensor() {
    // TFLM accepts only empty intermediates: one of 512 bytes reads, but has no arena.
    let mut m = unpacked("elementwise.tflite");
    operator(&mut m, 0).intermediates = Some(vec![1]);
    let model = read_hostile(&pack(&m), "mid.tflite", "a 512-byte intermediate").unwrap();
    assert_eq!(model.subgraphs[0].operators[0].intermediates, vec![1]);
    let err = arena(&model, ArenaOptions::default(), "mid.tflite").unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, TfliteError::Unsupported { .. }), "{err:?}");
    for part in [
        "mid.tflite",
        "operator 0 (RELU)",
        "intermediate tensor 1 'relu'",
    ] {
        assert!(text.contains(part), "'{part}' not in: {text}");
    }
}

#[test]
fn an_operator_code_out_of_range_is_an_error_naming_the_operator() {
    let mut m = unpacked("mean_tconv.tflite");
    let codes = m.operator_codes.as_ref().unwrap().len();
    operator(&mut m, 2).opcode_index = 77;
    invalid(
        &m,
        "code.tflite",
        &[
            "operator 2 uses operator code 77",
            &format!("{codes} operator codes"),
        ],
    );
    // No operator codes at all.
    let mut m = unpacked("mean_tconv.tflite");
    m.operator_codes = None;
    invalid(
        &m,
        "nocodes.tflite",
        &["operator 0 uses operator code", "0 operator codes"],
    );
}

#[test]
fn a_buffer_index_out_of_range_is_an_error_naming_the_tensor() {
    let mut m = unpacked("multi_output.tflite");
    let buffers = m.buffers.as_ref().unwrap().len();
    subgraph(&mut m, 0).tensors.as_mut().unwrap()[7].buffer = 4000;
    invalid(
        &m,
        "buf.tflite",
        &[
            "tensor 7 'stem_pool'",
            "buffer 4000",
            &format!("{buffers} buffers"),
        ],
    );
    // Metadata naming a buffer that is not there.
    let mut m = unpacked("multi_output.tflite");
    let mut entry = fb::MetadataT::default();
    entry.name = Some("OfflineMemoryAllocation".into());
    entry.buffer = 999;
    m.metadata = Some(vec![entry]);
    invalid(
        &m,
        "meta.tflite",
        &["metadata 0 'OfflineMemoryAllocation'", "buffer 999"],
    );
}

#[test]
fn unsizable_tensors_are_errors_naming_the_tensor() {
    let mut m = unpacked("elementwise.tflite");
    subgraph(&mut m, 0).tensors.as_mut().unwrap()[3].shape = Some(vec![1, -1, 8]);
    invalid(&m, "dyn.tflite", &["tensor 3 'logistic'", "dim 1", "-1"]);

    let mut m = unpacked("elementwise.tflite");
    subgraph(&mut m, 0).tensors.as_mut().unwrap()[4].type_ = fb::TensorType::STRING;
    invalid(&m, "str.tflite", &["tensor 4 'mul'", "STRING"]);

    let mut m = unpacked("elementwise.tflite");
    subgraph(&mut m, 0).tensors.as_mut().unwrap()[2].shape = Some(vec![i32::MAX; 3]);
    invalid(&m, "huge.tflite", &["tensor 2 'add'", "64 bits"]);

    let mut m = unpacked("elementwise.tflite");
    m.subgraphs = Some(Vec::new());
    invalid(&m, "nosg.tflite", &["no subgraphs"]);
}

#[test]
fn huge_tensors_fail_cleanly_downstream() {
    // A 2^62-byte activation reads and plans; its neighbours land beyond TFLM's int32
    // offsets, which offline_offsets refuses naming the buffer.
    let mut m = unpacked("elementwise.tflite");
    subgraph(&mut m, 0).tensors.as_mut().unwrap()[1].shape = Some(vec![1 << 30, 1 << 30, 4]);
    let bytes = pack(&m);
    let model = read_hostile(&bytes, "big.tflite", "a 2^62-byte tensor").unwrap();
    let big = arena(&model, ArenaOptions::default(), "big.tflite").unwrap();
    let plan = TflmGreedy.plan(&big.problem).unwrap();
    assert!(memplan::checker::check(&big.problem, &plan).is_valid());
    let err = offline_offsets(&big, &plan, "big.tflite").unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, TfliteError::Unsupported { .. }), "{err:?}");
    assert!(
        text.contains("big.tflite") && text.contains("2^31 - 1"),
        "{text}"
    );

    // Two live 2^63-byte tensors: the arena passes 2^64, an error and no panic.
    let mut m = unpacked("elementwise.tflite");
    for t in [0, 1] {
        subgraph(&mut m, 0).tensors.as_mut().unwrap()[t].shape = Some(vec![1 << 30, 1 << 30, 8]);
    }
    let model = read_hostile(&pack(&m), "bigger.tflite", "two 2^63-byte tensors").unwrap();
    let bigger = arena(&model, ArenaOptions::default(), "bigger.tflite").unwrap();
    assert!(TflmGreedy.plan(&bigger.problem).is_err());

    // A MEAN whose scratch request (4 bytes per output element) passes 2^64.
    let mut m = unpacked("mean_tconv.tflite");
    subgraph(&mut m, 0).tensors.as_mut().unwrap()[9].shape = Some(vec![i32::MAX, i32::MAX, 2]);
    let model = read_hostile(&pack(&m), "mean.tflite", "a huge MEAN").unwrap();
    let err = arena(&model, ArenaOptions::default(), "mean.tflite").unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("mean.tflite") && text.contains("scratch buffer 0 of MEAN@2"),
        "{text}"
    );
}

/// `WhileOptions` running `cond` and `body`.
fn while_options(cond: i32, body: i32) -> fb::BuiltinOptionsT {
    let mut w = fb::WhileOptionsT::default();
    w.cond_subgraph_index = cond;
    w.body_subgraph_index = body;
    fb::BuiltinOptionsT::WhileOptions(Box::new(w))
}

/// elementwise.tflite with operator 0 turned into a WHILE running `cond` and `body`.
fn with_while(cond: i32, body: i32) -> fb::ModelT {
    let mut m = unpacked("elementwise.tflite");
    let codes = m.operator_codes.as_mut().unwrap();
    let mut code = fb::OperatorCodeT::default();
    code.builtin_code = fb::BuiltinOperator::WHILE;
    code.deprecated_builtin_code = fb::BuiltinOperator::WHILE.0 as i8;
    codes.push(code);
    let index = (codes.len() - 1) as u32;
    let op = operator(&mut m, 0);
    op.opcode_index = index;
    op.builtin_options = while_options(cond, body);
    m
}

#[test]
fn subgraph_indices_out_of_range_and_self_calls_are_errors() {
    let m = with_while(0, 5);
    invalid(
        &m,
        "while.tflite",
        &["operator 0 (WHILE) runs subgraph 5", "1 subgraphs"],
    );
    let m = with_while(-3, 0);
    invalid(&m, "while.tflite", &["operator 0 (WHILE) runs subgraph -3"]);

    // A subgraph that runs itself reads, but TFLM would recurse forever: the arena is an
    // error naming the subgraph.
    let m = with_while(0, 0);
    let model = read_hostile(&pack(&m), "loop.tflite", "a WHILE running its own subgraph").unwrap();
    let err = arena(&model, ArenaOptions::default(), "loop.tflite").unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, TfliteError::Unsupported { .. }), "{err:?}");
    assert!(
        text.contains("loop.tflite") && text.contains("subgraph 0"),
        "{text}"
    );
}

/// Subgraphs 1..=depth, each running the next one twice (as a WHILE's condition and
/// body): TFLM's walk takes 2^depth scopes. A few KB of file; memplan must refuse it
/// quickly instead of walking for days.
#[test]
fn exponentially_nested_subgraphs_are_refused() {
    let depth = 40;
    let mut m = with_while(1, 1);
    let template = subgraph(&mut m, 0).clone();
    let while_code = m.operator_codes.as_ref().unwrap().len() as u32 - 1;
    for level in 1..=depth {
        let mut sg = fb::SubGraphT::default();
        let mut t = template.tensors.as_ref().unwrap()[0].clone();
        t.buffer = 0;
        t.shape = Some(vec![4]);
        sg.tensors = Some(vec![t]);
        sg.inputs = Some(vec![0]);
        sg.outputs = Some(vec![0]);
        if level < depth {
            let mut op = fb::OperatorT::default();
            op.opcode_index = while_code;
            op.inputs = Some(vec![0]);
            op.outputs = Some(vec![0]);
            op.builtin_options = while_options(level + 1, level + 1);
            sg.operators = Some(vec![op]);
        }
        m.subgraphs.as_mut().unwrap().push(sg);
    }
    let model = read_hostile(&pack(&m), "nested.tflite", "exponentially nested WHILEs").unwrap();
    // Without the scope limit this walks 2^40 scopes (the test would never end).
    let err = arena(&model, ArenaOptions::default(), "nested.tflite").unwrap_err();
    assert!(matches!(err, TfliteError::Unsupported { .. }), "{err:?}");
    assert!(err.to_string().contains("allocation scopes"), "{err}");
}

#[test]
fn a_model_without_buffers_reads_and_writes() {
    // No buffers vector at all: tensors name buffer 0, which TFLite reserves as empty.
    let mut m = unpacked("elementwise.tflite");
    m.buffers = None;
    for t in subgraph(&mut m, 0).tensors.as_mut().unwrap() {
        t.buffer = 0;
    }
    let bytes = pack(&m);
    let model = read_hostile(&bytes, "nobuf.tflite", "no buffers").unwrap();
    assert!(model.buffers.is_empty());
    let arena = arena(&model, ArenaOptions::default(), "nobuf.tflite").unwrap();
    // Every tensor, reshape/shape too, is now an activation.
    assert_eq!(arena.problem.len(), 11);
    let plan = TflmGreedy.plan(&arena.problem).unwrap();
    assert!(memplan::checker::check(&arena.problem, &plan).is_valid());
    let offsets = offline_offsets(&arena, &plan, "nobuf.tflite").unwrap();
    let written =
        memplan_tflite::write::with_offline_plan(&bytes, &offsets, "nobuf.tflite").unwrap();
    let again = read_model(&written, "written.tflite").unwrap();
    assert_eq!(again.subgraphs, model.subgraphs);
    assert_eq!(again.buffers.len(), 2, "the empty buffer 0 and the plan's");
    assert_eq!(
        memplan_tflite::offline::read(&again, "written.tflite").unwrap(),
        Some(offsets)
    );
}
