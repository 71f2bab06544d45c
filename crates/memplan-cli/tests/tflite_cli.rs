//! The `memplan` binary on `.tflite` models: `plan` (JSON fields, `--write-offline-plan`,
//! `tflm-greedy` against TFLM's own head), `check` of an embedded offline plan, `inspect`,
//! `bound`, and the flags a `.tflite` does not take.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use memplan::checker::check;
use memplan::planner::{Planner, TflmGreedy};
use memplan_tflite::{ArenaOptions, Entry, Sharing};
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn data_dir() -> PathBuf {
    root().join("crates/memplan-tflite/tests/data")
}

/// Every fixture, by path relative to the workspace root (where the binary runs).
fn fixtures() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(data_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tflite"))
        .map(|n| format!("crates/memplan-tflite/tests/data/{n}"))
        .collect();
    names.sort();
    assert!(names.len() >= 5, "{names:?}");
    names
}

fn memplan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memplan"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("the memplan binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

/// Runs `args`, which must succeed, and returns stdout.
fn ok(args: &[&str]) -> String {
    let out = memplan(args);
    assert!(
        out.status.success(),
        "memplan {args:?} failed ({:?}): {}",
        out.status.code(),
        stderr(&out)
    );
    stdout(&out)
}

/// Runs `args`, which must fail with exit code 2 (an error, not a panic), and returns
/// stderr.
fn fails(args: &[&str]) -> String {
    let out = memplan(args);
    assert_eq!(
        out.status.code(),
        Some(2),
        "memplan {args:?}: stdout {} stderr {}",
        stdout(&out),
        stderr(&out)
    );
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// The model and its arena as the CLI builds it (`sharing` from `--no-alias`/`--no-inplace`).
fn library_arena(path: &str, sharing: Sharing) -> (memplan_tflite::Model, memplan_tflite::Arena) {
    let model = memplan_tflite::read_file(&root().join(path)).unwrap();
    let options = ArenaOptions {
        sharing,
        ..ArenaOptions::default()
    };
    let arena = memplan_tflite::arena(&model, options, path).unwrap();
    (model, arena)
}

fn tensor_count(model: &memplan_tflite::Model) -> usize {
    model.subgraphs.iter().map(|s| s.tensors.len()).sum()
}

/// TFLM's own head: `tflm-greedy` on the arena without sharing, checked.
fn own_head(path: &str) -> u64 {
    let (_, arena) = library_arena(path, Sharing::NONE);
    let plan = TflmGreedy.plan(&arena.problem).unwrap();
    assert!(check(&arena.problem, &plan).is_valid());
    plan.arena_bytes.unwrap()
}

/// Reads a plan JSON the CLI printed for `path`'s arena and checks it.
fn checked_plan(text: &str, path: &str, sharing: Sharing) -> memplan::Plan {
    let (_, arena) = library_arena(path, sharing);
    let plan = memplan::io::json::read_plan_json(text, path, &arena.problem).unwrap();
    let report = check(&arena.problem, &plan);
    assert!(report.is_valid(), "{path}: {:?}", report.violations);
    plan
}

#[test]
fn plan_json_has_the_tflm_fields() {
    for path in fixtures() {
        let text = ok(&["plan", &path, "-f", "json"]);
        let value = json(&text);
        let (model, _) = library_arena(&path, Sharing::ALL);
        let head = value["tflm_head_bytes"].as_u64().expect("tflm_head_bytes");
        let own = value["tflm_own_head_bytes"]
            .as_u64()
            .expect("tflm_own_head_bytes");
        assert_eq!(own, own_head(&path), "{path}");
        assert!(head > 0, "{path}");
        assert_eq!(value["unmodelled_scratch"], serde_json::json!([]), "{path}");
        let offsets: Vec<i64> = value["offline_offsets"]
            .as_array()
            .expect("offline_offsets")
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        assert_eq!(offsets.len(), tensor_count(&model), "{path}");
        // The offsets are those of the plan printed (default: RESHAPE and in place shared).
        let plan = checked_plan(&text, &path, Sharing::ALL);
        let (_, arena) = library_arena(&path, Sharing::ALL);
        let expected = memplan_tflite::offline_offsets(&arena, &plan, &path).unwrap();
        assert_eq!(
            offsets,
            expected.iter().map(|&o| i64::from(o)).collect::<Vec<_>>(),
            "{path}"
        );
        // And TFLM's head with them is the head the library predicts.
        let placement = memplan_tflite::tflm_placement(&arena, &expected, &path).unwrap();
        let predicted = arena
            .problem
            .buffers()
            .iter()
            .zip(&placement)
            .map(|(b, &o)| o + b.size)
            .max()
            .unwrap();
        assert_eq!(head, predicted, "{path}");
    }
}

#[test]
fn tflm_greedy_without_sharing_is_tflm_own_head() {
    for path in fixtures() {
        let text = ok(&[
            "plan",
            &path,
            "--planner",
            "tflm-greedy",
            "-f",
            "json",
            "--no-alias",
            "--no-inplace",
        ]);
        let value = json(&text);
        let arena = value["arena_bytes"].as_u64().unwrap();
        assert_eq!(Some(arena), value["tflm_own_head_bytes"].as_u64(), "{path}");
        assert_eq!(arena, own_head(&path), "{path}");
        // TFLM with its own plan embedded places everything where it would anyway.
        assert_eq!(value["tflm_head_bytes"].as_u64(), Some(arena), "{path}");
        let plan = checked_plan(&text, &path, Sharing::NONE);
        assert_eq!(plan.arena_bytes, Some(arena));
    }
    // The README's TFLM heads.
    for (name, head) in [
        ("branchy", 3968),
        ("elementwise", 1536),
        ("mean_tconv", 5632),
        ("multi_output", 2304),
        ("equal_sizes", 2048),
    ] {
        assert_eq!(
            own_head(&format!("crates/memplan-tflite/tests/data/{name}.tflite")),
            head,
            "{name}"
        );
    }
}

#[test]
fn write_offline_plan_then_check_it() {
    let dir = tempfile::tempdir().unwrap();
    for path in fixtures() {
        for extra in [
            &[][..],
            &["--planner", "tflm-greedy", "--no-alias", "--no-inplace"][..],
        ] {
            let out = dir.path().join("planned.tflite");
            let out_str = out.to_str().unwrap();
            let mut args = vec!["plan", path.as_str(), "--write-offline-plan", out_str];
            args.extend_from_slice(extra);
            let table = ok(&args);
            assert!(table.contains("offline plan written"), "{table}");
            assert!(table.contains(out_str), "{table}");
            let mut json_args = vec!["plan", path.as_str(), "-f", "json"];
            json_args.extend_from_slice(extra);
            let planned = json(&ok(&json_args));

            // `memplan check OUT`: exit 0 and a valid verdict.
            let verdict = ok(&["check", out_str]);
            let line = verdict
                .lines()
                .find(|l| l.starts_with("verdict"))
                .unwrap_or_else(|| panic!("no verdict in {verdict}"));
            assert_eq!(line.split_whitespace().nth(1), Some("valid"), "{verdict}");
            assert!(verdict.contains(out_str), "{verdict}");
            let value = json(&ok(&["check", out_str, "-f", "json"]));
            assert_eq!(value["valid"], Value::Bool(true), "{path} {extra:?}");
            assert_eq!(value["violations"], serde_json::json!([]));
            assert_eq!(
                value["tflm_head_bytes"], planned["tflm_head_bytes"],
                "{path} {extra:?}"
            );
            let (model, _) = library_arena(&path, Sharing::NONE);
            assert_eq!(value["tensors"].as_u64(), Some(tensor_count(&model) as u64));

            // The written model: the same model with the printed offsets embedded.
            let written = memplan_tflite::read_file(&out).unwrap();
            assert_eq!(written.subgraphs, model.subgraphs, "{path}");
            let embedded = memplan_tflite::offline::read(&written, out_str)
                .unwrap()
                .unwrap();
            let printed: Vec<i32> = planned["offline_offsets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap() as i32)
                .collect();
            assert_eq!(embedded, printed, "{path} {extra:?}");
            let verdict = memplan_tflite::check_offline(&written, out_str)
                .unwrap()
                .unwrap();
            assert!(verdict.report.is_valid(), "{:?}", verdict.report.violations);
            let bytes = std::fs::read(&out).unwrap();
            assert_eq!(bytes.len() % 16, 0);
        }
    }
}

#[test]
fn a_broken_offline_plan_fails_the_check() {
    // Every planned tensor at offset 0: the check lists overlaps and exits 1.
    let dir = tempfile::tempdir().unwrap();
    let path = "crates/memplan-tflite/tests/data/branchy.tflite";
    let bytes = std::fs::read(root().join(path)).unwrap();
    let (_, arena) = library_arena(path, Sharing::NONE);
    let mut offsets = vec![-1; arena.tensor_count];
    for entry in &arena.entries {
        if let Entry::Tensors(group) = entry {
            offsets[group[0].1] = 0;
        }
    }
    let written = memplan_tflite::write::with_offline_plan(&bytes, &offsets, path).unwrap();
    let out = dir.path().join("broken.tflite");
    std::fs::write(&out, written).unwrap();
    let result = memplan(&["check", out.to_str().unwrap()]);
    assert_eq!(result.status.code(), Some(1), "{}", stderr(&result));
    let text = stdout(&result);
    assert!(text.contains("INVALID"), "{text}");
    assert!(
        text.contains("'stem'") && text.contains("'reduce'"),
        "{text}"
    );
}

#[test]
fn check_without_an_offline_plan_says_how_to_write_one() {
    for path in fixtures() {
        let err = fails(&["check", &path]);
        assert!(err.contains("--write-offline-plan"), "{err}");
        assert!(err.contains(&path), "{err}");
        assert!(err.contains("OfflineMemoryAllocation"), "{err}");
    }
}

#[test]
fn write_offline_plan_needs_a_tflite() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("small.csv");
    std::fs::write(&csv, "id,lower,upper,size\nb0,0,2,16\nb1,1,3,16\n").unwrap();
    let out = dir.path().join("out.tflite");
    let err = fails(&[
        "plan",
        csv.to_str().unwrap(),
        "--write-offline-plan",
        out.to_str().unwrap(),
    ]);
    assert!(err.contains("--write-offline-plan"), "{err}");
    assert!(err.contains("small.csv"), "{err}");
    assert!(!out.exists());
}

#[test]
fn inspect_csv_lists_the_arena_tensors() {
    for path in fixtures() {
        let text = ok(&["inspect", &path, "-f", "csv"]);
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some("name,dtype,shape,bytes,start,end,kind,shares_buffer_of")
        );
        let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
        let (model, arena) = library_arena(&path, Sharing::ALL);
        let sg = &model.subgraphs[0];
        // One row per planned tensor, then one per scratch buffer.
        let planned: usize = arena
            .entries
            .iter()
            .map(|e| match e {
                Entry::Tensors(g) => g.len(),
                Entry::Scratch(_) => 1,
            })
            .sum();
        assert_eq!(rows.len(), planned, "{path}: {text}");
        for row in &rows {
            assert_eq!(row.len(), 8, "{path}: {row:?}");
            let (start, end): (u64, u64) = (row[4].parse().unwrap(), row[5].parse().unwrap());
            assert!(start < end, "{row:?}");
            match row[6] {
                "scratch" => assert!(row[0].starts_with("scratch:"), "{row:?}"),
                "input" | "output" | "activation" => {
                    let tensor = sg.tensors.iter().find(|t| t.name == row[0]).unwrap();
                    assert_eq!(row[3], tensor.bytes.to_string(), "{row:?}");
                    assert!(!model.buffers[tensor.buffer].has_data(), "{row:?}");
                }
                other => panic!("{path}: kind {other} in {row:?}"),
            }
        }
    }
    // elementwise.tflite: `add` shares the input's buffer, `relu` its own.
    let text = ok(&[
        "inspect",
        "crates/memplan-tflite/tests/data/elementwise.tflite",
        "-f",
        "csv",
    ]);
    assert!(text.contains("\nadd,INT8,1x8x8x8,512,"), "{text}");
    let add = text.lines().find(|l| l.starts_with("add,")).unwrap();
    assert!(add.ends_with(",activation,input"), "{add}");
    let relu = text.lines().find(|l| l.starts_with("relu,")).unwrap();
    assert!(relu.ends_with(",activation,"), "{relu}");
    // Without sharing no row shares.
    let text = ok(&[
        "inspect",
        "crates/memplan-tflite/tests/data/elementwise.tflite",
        "-f",
        "csv",
        "--no-alias",
        "--no-inplace",
    ]);
    assert!(text.lines().skip(1).all(|l| l.ends_with(',')), "{text}");
    // mean_tconv.tflite: its four scratch buffers, no int32 constant.
    let text = ok(&[
        "inspect",
        "crates/memplan-tflite/tests/data/mean_tconv.tflite",
        "-f",
        "csv",
    ]);
    assert!(
        text.contains("\nscratch:TRANSPOSE_CONV@1#0,-,,4096,3,4,scratch,\n"),
        "{text}"
    );
    assert_eq!(text.matches(",scratch,").count(), 4, "{text}");
    assert!(!text.contains("INT32"), "{text}");
}

#[test]
fn bound_works_on_tflite() {
    for path in fixtures() {
        let table = ok(&["bound", &path]);
        assert!(table.contains("lower bound"), "{table}");
        let value = json(&ok(&["bound", &path, "-f", "json"]));
        let (_, arena) = library_arena(&path, Sharing::ALL);
        assert_eq!(
            value["lower_bound_bytes"].as_u64(),
            memplan::bound::max_live(&arena.problem),
            "{path}"
        );
        assert_eq!(value["buffers"].as_u64(), Some(arena.problem.len() as u64));
    }
}

#[test]
fn order_and_shape_flags_are_refused_for_tflite() {
    let path = "crates/memplan-tflite/tests/data/branchy.tflite";
    let err = fails(&["plan", path, "--order", "topological"]);
    assert!(err.contains("--order") && err.contains(path), "{err}");
    let err = fails(&["inspect", path, "--order", "topological"]);
    assert!(err.contains("--order"), "{err}");
    let err = fails(&["bound", path, "--order", "topological"]);
    assert!(err.contains("--order"), "{err}");
    let err = fails(&["plan", path, "--input-shape", "input=1x8x8x8"]);
    assert!(
        err.contains("--input-shape") && err.contains("static shapes"),
        "{err}"
    );
    let err = fails(&["plan", path, "--dim", "batch=2"]);
    assert!(err.contains("--dim"), "{err}");
}

#[test]
fn a_corrupt_model_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(data_dir().join("elementwise.tflite")).unwrap();
    let cut = dir.path().join("cut.tflite");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let cut = cut.to_str().unwrap();
    for command in ["plan", "check", "inspect", "bound"] {
        let err = fails(&[command, cut]);
        assert!(
            err.contains(cut) && err.contains("not a TFLite model"),
            "{command}: {err}"
        );
    }
}

#[test]
fn a_model_without_buffers_inspects_and_plans() {
    // No buffers vector: every tensor names buffer 0, the empty buffer TFLite reserves.
    use memplan_tflite::schema_generated::tflite as fb;
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(data_dir().join("elementwise.tflite")).unwrap();
    let mut model = fb::root_as_model(&bytes).unwrap().unpack();
    model.buffers = None;
    for t in model.subgraphs.as_mut().unwrap()[0]
        .tensors
        .as_mut()
        .unwrap()
    {
        t.buffer = 0;
    }
    let path = dir.path().join("nobuf.tflite");
    std::fs::write(&path, memplan_tflite::write::pack(&model)).unwrap();
    let path = path.to_str().unwrap();
    let text = ok(&["inspect", path, "-f", "csv"]);
    assert_eq!(text.lines().count(), 1 + 11, "{text}");
    let out = dir.path().join("planned.tflite");
    ok(&["plan", path, "--write-offline-plan", out.to_str().unwrap()]);
    let verdict = ok(&["check", out.to_str().unwrap()]);
    assert!(verdict.contains("valid"), "{verdict}");
}

/// A `.tflite` plan lists every tensor of the arena (shared ones in their owner's block)
/// at its block's offset plus `--base`, within the block.
#[test]
fn tflite_plans_give_every_tensor_an_address() {
    for name in fixtures() {
        let out = memplan(&["plan", &name, "--format", "json", "--base", "0x1000"]);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let value: Value = serde_json::from_slice(&out.stdout).unwrap();
        let buffers = value["buffers"].as_array().unwrap();
        let tensors = value["tensors"].as_array().unwrap();
        assert!(!tensors.is_empty(), "{name}");
        for t in tensors {
            let block = buffers
                .iter()
                .find(|b| b["id"] == t["block"])
                .unwrap_or_else(|| panic!("{name}: {t} names no block"));
            let offset = block["offset"].as_u64().unwrap();
            assert_eq!(t["offset"].as_u64(), Some(offset), "{name}: {t}");
            assert_eq!(t["address"].as_u64(), Some(0x1000 + offset), "{name}: {t}");
            assert!(t["size"].as_u64() <= block["size"].as_u64(), "{name}: {t}");
        }
    }
}
