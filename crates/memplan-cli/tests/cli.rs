//! Golden-file tests of the `memplan` binary's output, and its exit codes on bad input.
//!
//! Golden files live in `tests/golden/`. Timings are replaced by `<TIME>` before the
//! comparison. To accept a changed output, run with `UPDATE_GOLDEN=1` and review the diff.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn memplan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memplan"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("the memplan binary runs")
}

/// Replaces what changes from run to run (timings) with fixed markers.
fn normalise(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let line = if let Some(i) = line.find("\"planning_ms\": ") {
            let tail = &line[i + "\"planning_ms\": ".len()..];
            let rest = tail.trim_start_matches(|c: char| {
                c.is_ascii_digit() || c == '.' || c == 'e' || c == '-'
            });
            format!("{}\"planning_ms\": <TIME>{rest}", &line[..i])
        } else {
            replace_ms(line)
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// `0.123 ms` → `<TIME>` wherever it appears; the padding before it is kept as is.
fn replace_ms(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(i) = rest.find(" ms") {
        let head = &rest[..i];
        let number_start = head
            .rfind(|c: char| !(c.is_ascii_digit() || c == '.'))
            .map_or(0, |j| j + 1);
        if number_start < head.len() {
            out.push_str(&head[..number_start]);
            out.push_str("<TIME>");
        } else {
            out.push_str(head);
            out.push_str(" ms");
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    out
}

fn golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    let actual = normalise(actual);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "missing golden file {}; run with UPDATE_GOLDEN=1",
            path.display()
        )
    });
    assert_eq!(actual, expected, "output differs from {}", path.display());
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

#[test]
fn plan_table_golden() {
    let out = memplan(&["plan", "examples/small.csv"]);
    assert!(out.status.success(), "{}", stderr(&out));
    golden("plan_small_table.txt", &stdout(&out));
}

#[test]
fn plan_json_golden() {
    let out = memplan(&[
        "plan",
        "examples/small.csv",
        "--planner",
        "greedy-size-bestfit",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    golden("plan_small_json.txt", &stdout(&out));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in [
        "planner",
        "arena_bytes",
        "lower_bound_bytes",
        "alignment",
        "buffers",
    ] {
        assert!(value.get(key).is_some(), "plan JSON lacks '{key}'");
    }
}

#[test]
fn search_reports_optimality_in_json_and_progress_on_stderr() {
    let out = memplan(&[
        "plan",
        "examples/small.csv",
        "--planner",
        "search",
        "--time-limit",
        "10",
        "--threads",
        "1",
        "--search-rules",
        "-restarts",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(value["planner"], "search");
    assert_eq!(value["proven_optimal"], true, "{value}");
    assert!(value["search_nodes"].is_u64());
    assert_eq!(value["arena_bytes"], value["search_lower_bound"]);
    let table = memplan(&["plan", "examples/small.csv", "-p", "search"]);
    assert!(table.status.success(), "{}", stderr(&table));
    assert!(
        stdout(&table).contains("proven optimal      yes"),
        "{}",
        stdout(&table)
    );
    let bad = memplan(&[
        "plan",
        "examples/small.csv",
        "-p",
        "search",
        "--search-rules",
        "-x",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("known rules"), "{}", stderr(&bad));
}

#[test]
fn plan_csv_golden_with_alignment() {
    let out = memplan(&[
        "plan",
        "examples/small.csv",
        "--format",
        "csv",
        "--alignment",
        "4096",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    golden("plan_small_csv_align4096.txt", &stdout(&out));
}

#[test]
fn planners_golden() {
    let out = memplan(&["planners"]);
    assert!(out.status.success());
    golden("planners.txt", &stdout(&out));
}

#[test]
fn bound_golden() {
    let out = memplan(&["bound", "examples/mobilenet_v2.csv"]);
    assert!(out.status.success());
    golden("bound_mobilenet_v2.txt", &stdout(&out));
}

#[test]
fn csv_and_json_plans_are_accepted_back_by_check() {
    let dir = tempfile::tempdir().unwrap();
    for (format, name) in [("csv", "plan.csv"), ("json", "plan.json")] {
        let path = dir.path().join(name);
        let path = path.to_str().unwrap();
        let out = memplan(&[
            "plan",
            "examples/mobilenet_v2.csv",
            "--format",
            format,
            "--output",
            path,
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let out = memplan(&["check", "examples/mobilenet_v2.csv", path]);
        assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
        assert!(stdout(&out).starts_with("valid"), "{}", stdout(&out));
    }
}

#[test]
fn check_lists_every_violation_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("bad.csv");
    // Everything at offset 0: conv1/relu1 and others overlap; one offset misaligned is not
    // possible here (alignment 1), so count the overlaps.
    std::fs::write(
        &plan,
        "id,lower,upper,size,offset\nconv1_out,0,2,4096,0\nrelu1_out,1,3,4096,0\nconv2_out,2,4,8192,0\nskip,1,5,2048,0\nadd_out,4,6,8192,0\n",
    )
    .unwrap();
    let out = memplan(&["check", "examples/small.csv", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    golden(
        "check_invalid.txt",
        &stdout(&out).replace(plan.to_str().unwrap(), "bad.csv"),
    );
}

#[test]
fn bad_input_exits_2_naming_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str, &[&str])] = &[
        ("missing_column.csv", "id,lower,size\na,0,4\n", &["upper"]),
        (
            "not_a_number.csv",
            "id,lower,upper,size\na,0,2,4\nb,1,x,4\n",
            &[":3", "upper", "'x'"],
        ),
        (
            "negative.csv",
            "id,lower,upper,size\na,0,2,-4\n",
            &[":2", "size"],
        ),
        (
            "empty_lifetime.csv",
            "id,lower,upper,size\na,3,3,4\n",
            &[":2", "upper"],
        ),
        (
            "duplicate.csv",
            "id,lower,upper,size\na,0,2,4\na,1,2,4\n",
            &[":3", "'a'"],
        ),
        (
            "overflow.csv",
            "id,lower,upper,size,offset\na,0,2,4,18446744073709551615\n",
            &[":2", "offset"],
        ),
        (
            // Each size fits, their sum at step 1 does not: the step and buffers are named.
            "live_overflow.csv",
            "id,lower,upper,size\nsmall,3,4,4\nbig,0,3,18446744073709551615\nother,1,3,9\n",
            &[
                "step 1",
                "2 buffers",
                "'big' (18446744073709551615 bytes)",
                "'other'",
            ],
        ),
    ];
    for (name, text, needles) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let out = memplan(&["plan", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stdout(&out));
        let err = stderr(&out);
        assert!(
            err.contains(name),
            "{name}: error does not name the file: {err}"
        );
        for needle in *needles {
            assert!(
                err.contains(needle),
                "{name}: error lacks {needle:?}: {err}"
            );
        }
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
}

#[test]
fn unknown_planner_lists_known_ones() {
    let out = memplan(&["plan", "examples/small.csv", "--planner", "magic"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("magic") && err.contains("best-of"), "{err}");
}

#[test]
fn missing_file_is_named() {
    let out = memplan(&["plan", "does/not/exist.csv"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("does/not/exist.csv"));
}

#[test]
fn done_when_minimalloc_a_best_of_json_is_valid() {
    let file = root().join("../shared/benchmarks/minimalloc/challenging/A.1048576.csv");
    if !file.exists() {
        eprintln!("skipping: ../shared not found");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("a.json");
    let out = memplan(&[
        "plan",
        file.to_str().unwrap(),
        "--planner",
        "best-of",
        "--format",
        "json",
        "--output",
        plan.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert_eq!(value["buffers"].as_array().unwrap().len(), 154);
    assert_eq!(value["lower_bound_bytes"], 1048576);
    let out = memplan(&["check", file.to_str().unwrap(), plan.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stdout(&out));
}

/// Zero-size buffers are planned (at offset 0, adding nothing to the arena), written to
/// the plan JSON and accepted by `check` (issue #13: they used to be a size error).
#[test]
fn zero_size_buffers_are_planned_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("zero_size.csv");
    std::fs::write(
        &file,
        "id,lower,upper,size,alignment\na,0,2,8,\nz,0,3,0,64\nb,1,3,8,\nw,5,6,0,\n",
    )
    .unwrap();
    for planner in ["naive", "best-of", "strip", "search", "tflm-greedy"] {
        let plan = dir.path().join(format!("{planner}.json"));
        let out = memplan(&[
            "plan",
            file.to_str().unwrap(),
            "--planner",
            planner,
            "--time-limit",
            "0.2",
            "--format",
            "json",
            "--output",
            plan.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{planner}: {}", stderr(&out));
        let value: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
        assert_eq!(value["arena_bytes"], 16, "{planner}");
        assert_eq!(value["lower_bound_bytes"], 16, "{planner}");
        let buffers = value["buffers"].as_array().unwrap();
        assert_eq!(buffers.len(), 4);
        assert_eq!(
            (&buffers[1]["size"], &buffers[1]["offset"]),
            (&0.into(), &0.into())
        );
        let out = memplan(&["check", file.to_str().unwrap(), plan.to_str().unwrap()]);
        assert!(out.status.success(), "{planner}: {}", stdout(&out));
    }
}

#[test]
fn inspect_golden_in_every_format() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["inspect", "examples/small_cnn.json"],
            "inspect_small_cnn_table.txt",
        ),
        (
            &[
                "inspect",
                "examples/small_cnn.json",
                "--no-alias",
                "--no-inplace",
                "--format",
                "csv",
            ],
            "inspect_small_cnn_plain_csv.txt",
        ),
        (
            &["inspect", "examples/small_cnn.json", "--format", "json"],
            "inspect_small_cnn_json.txt",
        ),
    ];
    for (args, golden_name) in cases {
        let out = memplan(args);
        assert!(out.status.success(), "{}", stderr(&out));
        golden(golden_name, &stdout(&out));
    }
}

#[test]
fn plan_of_a_graph_reports_the_sharing_golden() {
    let out = memplan(&["plan", "examples/small_cnn.json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    golden("plan_small_cnn_table.txt", &stdout(&out));
    let out = memplan(&[
        "plan",
        "examples/small_cnn.json",
        "--no-alias",
        "--no-inplace",
        "--order",
        "topological",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(value["buffers"].as_array().unwrap().len(), 8);
    assert_eq!(value["lower_bound_bytes"], 3 * 32768);
    assert_eq!(value["alias_saved_bytes"], 0);
}

#[test]
fn a_graph_plan_is_accepted_back_by_check_with_the_same_flags() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    let plan = plan.to_str().unwrap();
    let out = memplan(&[
        "plan",
        "examples/small_cnn.json",
        "--no-inplace",
        "--format",
        "json",
        "--output",
        plan,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = memplan(&["check", "examples/small_cnn.json", plan, "--no-inplace"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
}

#[test]
fn graph_errors_exit_2_naming_file_and_nodes() {
    let data = "crates/memplan-graph/tests/data";
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["inspect", &format!("{data}/cycle.json")],
            &["cycle.json", "'first'", "'second'", "'third'", "cycle"],
        ),
        (
            &["plan", &format!("{data}/read_before_produce.json")],
            &["'late_reader'", "'producer'", "'a'", "topological"],
        ),
        (
            &["bound", &format!("{data}/dangling.json")],
            &["'add'", "'ghost'"],
        ),
        (
            &["inspect", "examples/small.csv"],
            &["small.csv", "not a graph"],
        ),
        (&["inspect", "model.onnx"], &["model.onnx", "cannot read"]),
        (
            &["plan", "crates/memplan-cli/tests/data/not_a_model.onnx"],
            &["not_a_model.onnx", "not a valid ONNX model"],
        ),
    ];
    for (args, needles) in cases {
        let out = memplan(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stdout(&out));
        let err = stderr(&out);
        for needle in *needles {
            assert!(
                err.contains(needle),
                "{args:?}: error lacks {needle:?}: {err}"
            );
        }
    }
    let out = memplan(&[
        "plan",
        &format!("{data}/read_before_produce.json"),
        "--order",
        "topological",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// `../shared/models`, or `None` (with a note on stderr) when `../shared` is absent.
fn shared_models() -> Option<PathBuf> {
    let models = root().join("../shared/models");
    if !models.is_dir() {
        eprintln!("skipping: ../shared not found");
        return None;
    }
    Some(models)
}

/// The seven models of `../shared/models` and their `max_live_bytes_onnx_order`.
fn reference_models(models: &Path) -> Vec<(String, u64)> {
    let text = std::fs::read_to_string(models.join("reference.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (model, max_live) = (column("model"), column("max_live_bytes_onnx_order"));
    lines
        .map(|line| {
            let cells: Vec<&str> = line.split(',').collect();
            (cells[model].to_string(), cells[max_live].parse().unwrap())
        })
        .collect()
}

#[test]
fn done_when_every_model_matches_its_reference_and_plans_validly() {
    let Some(models) = shared_models() else {
        return;
    };
    let references = reference_models(&models);
    assert_eq!(references.len(), 7);
    let dir = tempfile::tempdir().unwrap();
    for (model, max_live) in references {
        let onnx = models.join(format!("{model}.onnx"));
        let onnx = onnx.to_str().unwrap();
        let unshared = ["--no-alias", "--no-inplace"];

        // Every tensor's name, dtype, shape, bytes, lifetime and kind, as in tensors.csv.
        let out = memplan(&[&["inspect", onnx, "--format", "csv"], &unshared[..]].concat());
        assert!(out.status.success(), "{model}: {}", stderr(&out));
        let ours: Vec<String> = stdout(&out)
            .lines()
            .map(|l| l.split(',').take(7).collect::<Vec<_>>().join(","))
            .collect();
        let reference =
            std::fs::read_to_string(models.join(format!("{model}.tensors.csv"))).unwrap();
        let reference: Vec<&str> = reference.lines().map(str::trim_end).collect();
        assert_eq!(ours, reference, "{model}: inspect --format csv");

        // The max-live bound of the file order without sharing.
        let out = memplan(&[&["bound", onnx, "--format", "json"], &unshared[..]].concat());
        assert!(out.status.success(), "{model}: {}", stderr(&out));
        let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(value["lower_bound_bytes"], max_live, "{model}: max-live");

        // best-of plans, with and without sharing, accepted back by check.
        for flags in [&[][..], &unshared[..]] {
            let plan = dir.path().join(format!("{model}.json"));
            let plan = plan.to_str().unwrap();
            let args = [&["plan", onnx, "--format", "json", "--output", plan], flags].concat();
            let out = memplan(&args);
            assert!(out.status.success(), "{model} {flags:?}: {}", stderr(&out));
            let out = memplan(&[&["check", onnx, plan], flags].concat());
            assert!(out.status.success(), "{model} {flags:?}: {}", stdout(&out));
        }
    }
}

#[test]
fn plan_ascii_golden() {
    let out = memplan(&[
        "plan",
        "examples/small.csv",
        "--planner",
        "strip",
        "--format",
        "ascii",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    golden("plan_small_ascii.txt", &stdout(&out));
}

#[test]
fn plan_strip_table_golden_shows_iterations_and_stop() {
    let out = memplan(&[
        "plan",
        "examples/mobilenet_v2.csv",
        "--planner",
        "strip",
        "--metric",
        "size",
        "--max-iters",
        "3",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for needle in [
        "variant      size descending bottom",
        "iterations",
        "stopped by",
    ] {
        assert!(text.contains(needle), "lacks {needle:?}: {text}");
    }
    golden("plan_mobilenet_strip_table.txt", &text);
}

#[test]
fn plan_strip_json_has_the_tuning_fields() {
    let out = memplan(&[
        "plan",
        "examples/small.csv",
        "--planner",
        "strip",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(value["metric"], "size+overlap");
    assert_eq!(value["order"], "descending");
    assert_eq!(value["placement"], "bottom");
    assert_eq!(value["variants_run"], 1);
    assert_eq!(value["stop"], "bound");
    assert_eq!(value["iterations"], 0);
    assert!(value["max_iters"].is_u64() && value["first_arena_bytes"].is_u64());
}

#[test]
fn strip_options_are_checked() {
    let out = memplan(&[
        "plan",
        "examples/small.csv",
        "--planner",
        "strip",
        "--metric",
        "area",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("'area'") && err.contains("size*length"),
        "{err}"
    );
    let out = memplan(&["plan", "examples/small.csv", "--metric", "size"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--planner strip"), "{}", stderr(&out));
}

/// The SVG is well-formed enough: one root, balanced tags, one hover title per buffer.

#[test]
fn plan_svg_is_written_and_well_formed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.svg");
    let out = memplan(&[
        "plan",
        "examples/mobilenet_v2.csv",
        "--svg",
        path.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.trim_end().ends_with("</svg>"));
    let mut stack: Vec<String> = Vec::new();
    let mut rest = svg.as_str();
    while let Some(open) = rest.find('<') {
        let close = rest[open..].find('>').expect("every tag closes") + open;
        let tag = &rest[open + 1..close];
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        if let Some(closing) = tag.strip_prefix('/') {
            assert_eq!(stack.pop().as_deref(), Some(closing.trim()), "at {tag}");
        } else if !tag.ends_with('/') {
            stack.push(name);
        }
        rest = &rest[close + 1..];
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
    assert_eq!(svg.matches("<g fill=").count(), 101);
    assert!(svg.contains("id=\"profile\"") && svg.contains("max-live"));
}

#[test]
fn pool_train_golden_and_plan_file() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    let out = memplan(&[
        "pool",
        "train",
        "examples/pool_trace.csv",
        "-o",
        plan.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    golden("pool_train_table.txt", &stdout(&out));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert_eq!(json["format"], "memplan-pool-plan");
    assert!(json["blocks"].as_array().is_some_and(|b| !b.is_empty()));
}

#[test]
fn pool_replay_json_reports_every_iteration() {
    for allocator in ["pool", "system"] {
        let out = memplan(&[
            "pool",
            "replay",
            "examples/pool_trace.csv",
            "--allocator",
            allocator,
            "--format",
            "json",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(json["allocator"], allocator);
        let iterations = json["iterations"].as_array().unwrap();
        assert_eq!(iterations.len(), 3);
        for it in iterations {
            for key in [
                "iteration",
                "minor_faults",
                "peak_rss_bytes",
                "ns_per_alloc_free",
            ] {
                assert!(it[key].is_number(), "{key} in {it}");
            }
        }
        if allocator == "pool" {
            // Iterations 1 and 2 are served from the plan trained on iteration 1.
            assert_eq!(iterations[1]["plan_hit_rate"], 1.0);
            assert_eq!(iterations[2]["plan_hit_rate"], 1.0);
        } else {
            assert!(iterations[0]["plan_hit_rate"].is_null());
        }
    }
}

/// Without the `bench-allocators` feature, replaying through jemalloc is a clear error
/// that names the feature; with it, the replay runs.
#[test]
fn pool_replay_through_jemalloc_needs_the_feature() {
    let out = memplan(&[
        "pool",
        "replay",
        "examples/pool_trace.csv",
        "--allocator",
        "jemalloc",
    ]);
    if cfg!(feature = "bench-allocators") {
        assert!(out.status.success(), "{}", stderr(&out));
    } else {
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("bench-allocators"),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn pool_bad_trace_names_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, "op,size,id\nalloc,12,1\nalloc,x,2\n").unwrap();
    let out = memplan(&["pool", "train", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("bad.csv:3: field `size`"), "{err}");
}

#[test]
fn pool_bench_compares_every_allocator() {
    let out = memplan(&["pool", "bench", "examples/pool_trace.csv"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let allocators: &[&str] = if cfg!(feature = "bench-allocators") {
        &["system", "jemalloc", "mimalloc", "pool"]
    } else {
        &["system", "pool"]
    };
    for allocator in allocators {
        assert!(
            text.lines().any(|l| l.trim_start().starts_with(allocator)),
            "{allocator} missing in\n{text}"
        );
    }
}

#[test]
fn swap_none_golden() {
    let file = "crates/memplan-cli/tests/data/tiny.graph.txt";
    let out = memplan(&["swap", file]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    golden("swap_tiny_table.txt", &stdout(&out));
    let out = memplan(&[
        "swap",
        file,
        "--th-tts",
        "4",
        "--th-size",
        "0",
        "--max",
        "1",
        "-f",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    golden("swap_tiny_json.txt", &stdout(&out));
}

/// A PyTorch trace (`memplan.torch.trace`, saved): planned by the CLI with the trace's
/// measured machine, every planner and reduction; a .json that is not a trace is refused
/// with the format named.
#[test]
fn swap_plans_a_pytorch_trace() {
    let file = "crates/memplan-swap/tests/data/torch/small_cnn.json";
    for extra in [
        &[][..],
        &["--compress", "fp16"],
        &["--compress", "int8", "--on-device"],
        &["--recompute"],
    ] {
        let mut args = vec![
            "swap",
            file,
            "--planner",
            "all",
            "--budget",
            "50%",
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        let out = memplan(&args);
        assert_eq!(out.status.code(), Some(0), "{extra:?}: {}", stderr(&out));
        let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        for planner in ["method", "lms", "everything"] {
            let before = report[planner]["before"]["peak_bytes"].as_u64().unwrap();
            let after = report[planner]["after"]["peak_bytes"].as_u64().unwrap();
            assert!(after <= before, "{extra:?} {planner}: {report}");
            if extra.is_empty() {
                assert!(after < before, "{planner}: nothing saved: {report}");
            }
        }
    }
    let out = memplan(&["swap", file, "--planner", "none"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("measured peak  4802816 B"),
        "{}",
        stdout(&out)
    );
    let out = memplan(&["swap", "examples/small_cnn.json", "--planner", "none"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("memplan-torch-trace"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn swap_errors_exit_2() {
    let file = "crates/memplan-cli/tests/data/tiny.graph.txt";
    let out = memplan(&["swap", file, "--planner", "method"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--budget (e.g. --budget 50%)"),
        "{}",
        stderr(&out)
    );
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.graph.txt");
    std::fs::write(&bad, "node1 -- Input -- forward_compute_time=1\n").unwrap();
    let out = memplan(&["swap", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("bad.graph.txt:1: "),
        "{}",
        stderr(&out)
    );
    let out = memplan(&["swap", file, "--th-tts", "-1"]);
    assert_eq!(out.status.code(), Some(2));
    // Parse errors name the flag and show an accepted example.
    for (flag, value, example) in [
        ("--link", "fast", "12GB/s"),
        ("--budget", "half", "50%"),
        ("--max-overhead", "some", "5%"),
    ] {
        let out = memplan(&["swap", file, "--planner", "method", flag, value]);
        assert_eq!(out.status.code(), Some(2));
        let err = stderr(&out);
        assert!(err.contains(flag) && err.contains(example), "{err}");
    }
    let out = memplan(&[
        "swap",
        file,
        "--planner",
        "method",
        "--budget",
        "50%",
        "--max-overhead",
        "5%",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("not both"), "{}", stderr(&out));
    let out = memplan(&[
        "swap",
        file,
        "--planner",
        "all",
        "--budget",
        "50%",
        "--write-dot",
        "x.dot",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("one planner"), "{}", stderr(&out));
}

/// The planners on a small shipped profile (link 2 MB/s, so its KB tensors take
/// milliseconds to copy): within 5% overhead, and at a budget of 60% (out of reach:
/// the forward/backward boundary holds more).
#[test]
fn swap_planners_golden() {
    let file = "crates/memplan-cli/tests/data/small.graph.txt";
    let args = [
        "swap",
        file,
        "--planner",
        "all",
        "--link",
        "2MB/s",
        "--copy-latency",
        "0",
    ];
    let out = memplan(&[&args[..], &["--max-overhead", "5%"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    golden("swap_small_all_table.txt", &stdout(&out));
    let out = memplan(&[&args[..], &["--max-overhead", "5%", "-f", "json"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    golden("swap_small_all_json.txt", &stdout(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    for planner in ["method", "lms", "everything"] {
        let after = &json[planner]["after"];
        assert!(after["step_time_ms"].as_f64().unwrap() <= 34.0 * 1.05 + 1e-9);
        assert!(after["peak_bytes"].as_u64().unwrap() <= 18000);
        assert_eq!(json[planner]["before"]["peak_bytes"], 18000);
    }
    let out = memplan(&[&args[..], &["--budget", "60%", "-f", "json"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    golden("swap_small_budget_json.txt", &stdout(&out));
}

#[test]
fn swap_writes_rewritten_graph_and_profile() {
    let file = "crates/memplan-cli/tests/data/small.graph.txt";
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let out = memplan(&[
        "swap",
        file,
        "--planner",
        "method",
        "--link",
        "2MB/s",
        "--budget",
        "16000",
        "--compress",
        "fp16",
        "--write-json",
        &path("r.json"),
        "--write-dot",
        &path("r.dot"),
        "--profile-csv",
        &path("r.csv"),
        "--profile-svg",
        &path("r.svg"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let dot = std::fs::read_to_string(path("r.dot")).unwrap();
    assert!(
        dot.contains("compress:") && dot.contains("swapin:"),
        "{dot}"
    );
    assert!(dot.contains("style=dashed"));
    let out = memplan(&["inspect", &path("r.json"), "--no-inplace", "--no-alias"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let csv = std::fs::read_to_string(path("r.csv")).unwrap();
    assert!(csv.starts_with("time_ms,device_bytes,host_bytes\n"));
    let svg = std::fs::read_to_string(path("r.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("device peak"));
}

/// The rewritten graph written as graph JSON and fed back: its copies on the host are
/// `host` values, outside the device arena of `bound` (and `plan`), whose max-live is
/// here the simulator's device peak (16,000 B; counting the 12,000 B on the host would
/// give more).
#[test]
fn swap_written_graph_keeps_host_values_off_the_device() {
    let file = "crates/memplan-cli/tests/data/small.graph.txt";
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let json = json.to_str().unwrap();
    let out = memplan(&[
        "swap",
        file,
        "--planner",
        "method",
        "--link",
        "2MB/s",
        "--budget",
        "16000",
        "--write-json",
        json,
        "-f",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let (peak, host) = (
        report["after"]["peak_bytes"].as_u64().unwrap(),
        report["after"]["host_peak_bytes"].as_u64().unwrap(),
    );
    assert_eq!((peak, host), (16000, 12000));
    let out = memplan(&["inspect", json]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let host_rows: Vec<&str> = text.lines().filter(|l| l.contains("@host")).collect();
    assert!(!host_rows.is_empty(), "{text}");
    assert!(
        host_rows.iter().all(|l| l.trim_end().ends_with("host")),
        "{text}"
    );
    let out = memplan(&["bound", json]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.lines()
            .any(|l| l.starts_with("lower bound") && l.contains(&format!(" {peak} B "))),
        "{text}"
    );
}

/// `--compress fp24` and `--recompute` reach the planners; `--recompute` takes no codec.
#[test]
fn swap_fp24_and_recompute() {
    let file = "crates/memplan-cli/tests/data/small.graph.txt";
    let base = ["swap", file, "--planner", "method", "--budget", "16000"];
    let out = memplan(&[&base[..], &["--compress", "fp24"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("compress to fp24, copy to host"));
    let out = memplan(&[&base[..], &["--recompute"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("delete and recompute"));
    let out = memplan(&[&base[..], &["--recompute", "--compress", "fp16"]].concat());
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("--recompute"), "{}", stderr(&out));
}

#[test]
fn swap_writes_graph_json_and_dot() {
    let file = "crates/memplan-cli/tests/data/tiny.graph.txt";
    let dir = tempfile::tempdir().unwrap();
    let (json, dot) = (dir.path().join("step.json"), dir.path().join("step.dot"));
    let out = memplan(&[
        "swap",
        file,
        "--write-json",
        json.to_str().unwrap(),
        "--write-dot",
        dot.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The exported graph is a valid graph JSON that `inspect` reads.
    let out = memplan(&[
        "inspect",
        json.to_str().unwrap(),
        "--no-inplace",
        "--no-alias",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let dot = std::fs::read_to_string(dot).unwrap();
    assert!(dot.starts_with("digraph ") && dot.contains("node4.bwd"));
}

#[test]
fn swap_onnx_golden_device_flags_and_export() {
    let file = "crates/memplan-onnx/tests/data/small.onnx";
    let out = memplan(&["swap", file]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    golden("swap_small_onnx_table.txt", &stdout(&out));
    // A device 1000x slower in throughput and bandwidth takes longer; without launch
    // costs the (launch-bound) small step is shorter; the peak never changes.
    let step_ms = |args: &[&str]| {
        let out = memplan(&[&["swap", file, "-f", "json"], args].concat());
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        (
            v["step_ms"].as_f64().unwrap(),
            v["peak_bytes"].as_u64().unwrap(),
        )
    };
    let (fast, peak) = step_ms(&[]);
    let (slow, slow_peak) = step_ms(&["--peak-tflops", "0.0157", "--mem-bandwidth", "0.9"]);
    assert!(slow > fast, "{slow} <= {fast}");
    let (free, free_peak) = step_ms(&["--launch-us", "0"]);
    assert!(free < fast, "{free} >= {fast}");
    assert_eq!((peak, peak), (slow_peak, free_peak));
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("step.json");
    let out = memplan(&["swap", file, "--write-json", json.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = memplan(&[
        "inspect",
        json.to_str().unwrap(),
        "--no-inplace",
        "--no-alias",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("grad:relu->c"), "{}", stdout(&out));
}

#[test]
fn swap_onnx_errors_exit_2() {
    let onnx = "crates/memplan-onnx/tests/data/small.onnx";
    let profile = "crates/memplan-cli/tests/data/tiny.graph.txt";
    let cases: &[(&[&str], &str)] = &[
        (&["swap", onnx, "--peak-tflops", "0"], "peak throughput"),
        (&["swap", onnx, "--mem-bandwidth=-1"], "memory bandwidth"),
        (
            &["swap", profile, "--dim", "N=2"],
            "ONNX models (.onnx) only",
        ),
        (
            &["swap", profile, "--launch-us", "1"],
            "ONNX models (.onnx) only",
        ),
        (
            &["swap", "crates/memplan-cli/tests/data/not_a_model.onnx"],
            "not a valid ONNX model",
        ),
    ];
    for (args, needle) in cases {
        let out = memplan(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn exclusive_plan_golden() {
    let out = memplan(&[
        "plan",
        "examples/exclusive_example.json",
        "--planner",
        "exclusive",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("arena              48234496 B (46.00 MiB)"),
        "{text}"
    );
    golden("plan_exclusive_example_table.txt", &text);
}

#[test]
fn inspect_exclusive_golden() {
    let out = memplan(&[
        "inspect",
        "--exclusive",
        "examples/exclusive_example.json",
        "--exclusive-rules",
        "edges,outputs",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    golden("inspect_exclusive_example_table.txt", &stdout(&out));
}

#[test]
fn exclusive_on_a_buffer_list_uses_lifetimes_and_all_orders_needs_a_graph() {
    // A buffer list has no edges: rule 4 alone, i.e. the list's own problem; the plan
    // checks against it.
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    let plan = plan.to_str().unwrap();
    let out = memplan(&[
        "plan",
        "examples/small.csv",
        "--planner",
        "exclusive",
        "--format",
        "json",
        "-o",
        plan,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = memplan(&["check", "examples/small.csv", plan]);
    assert!(out.status.success(), "{}", stdout(&out));
    let out = memplan(&[
        "plan",
        "examples/small.csv",
        "--planner",
        "exclusive:orders=all",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("needs a graph"), "{}", stderr(&out));
    let out = memplan(&[
        "plan",
        "examples/small_cnn.json",
        "--planner",
        "exclusive",
        "--exclusive-rules",
        "edge",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("edges, branches, outputs"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn inspect_operators_golden() {
    let out = memplan(&["inspect", "--operators", "examples/small_cnn.json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    golden("inspect_operators_small_cnn_table.txt", &stdout(&out));
    let out = memplan(&[
        "inspect",
        "--operators",
        "examples/small_cnn.json",
        "-f",
        "csv",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    golden("inspect_operators_small_cnn_csv.txt", &stdout(&out));
    // JSON: every operator's width is the bytes of the tensors present.
    let out = memplan(&[
        "inspect",
        "--operators",
        "examples/small_cnn.json",
        "-f",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let value: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let operators = value["operators"].as_array().unwrap();
    assert_eq!(operators.len(), 7);
    for op in operators {
        let sum: u64 = op["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["bytes"].as_u64().unwrap())
            .sum();
        assert_eq!(op["width"].as_u64(), Some(sum), "{op}");
    }
    assert_eq!(operators[0]["group"], "accelerated");
}

#[test]
fn npu_plan_golden_and_checked() {
    let out = memplan(&["plan", "examples/small_cnn.json", "--planner", "npu"]);
    assert!(out.status.success(), "{}", stderr(&out));
    golden("plan_npu_small_cnn_table.txt", &stdout(&out));
    let out = memplan(&[
        "plan",
        "examples/small_cnn.json",
        "--planner",
        "npu",
        "--platform",
        "platforms/npu-pooled.json",
        "--match",
        "lifetime",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    golden(
        "plan_npu_pooled_lifetime_small_cnn_table.txt",
        &stdout(&out),
    );
    let dir = tempfile::tempdir().unwrap();
    for rule in ["exact", "size", "lifetime"] {
        for input in ["examples/small_cnn.json", "examples/small.csv"] {
            let plan = dir.path().join(format!("npu-{rule}.json"));
            let plan = plan.to_str().unwrap();
            let out = memplan(&[
                "plan",
                input,
                "--planner",
                "npu",
                "--match",
                rule,
                "-f",
                "json",
                "-o",
                plan,
            ]);
            assert!(out.status.success(), "{}", stderr(&out));
            let text = std::fs::read_to_string(plan).unwrap();
            let value: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(value["match"], rule);
            // The slack applies to size match only, unbounded ("any") by default.
            let slack = if rule == "size" {
                serde_json::json!("any")
            } else {
                serde_json::Value::Null
            };
            assert_eq!(value["slack"], slack);
            assert_eq!(
                value["reused_bytes"].as_u64().is_some(),
                value["new_pool_bytes"].as_u64().is_some()
            );
            let out = memplan(&["check", input, plan]);
            assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
        }
    }
}

/// `--match size` is the method's size match (any larger buffer, the least difference);
/// the default `exact` is the named deviation; a slack bounds size match only.
#[test]
fn npu_match_size_is_the_method_and_exact_the_default() {
    let out = memplan(&[
        "plan",
        "examples/small_cnn.json",
        "--planner",
        "npu",
        "--match",
        "size",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("size, slack any"), "{}", stdout(&out));
    let out = memplan(&["plan", "examples/small_cnn.json", "--planner", "npu"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("exact (equal sizes only"),
        "{}",
        stdout(&out)
    );
    for args in [
        &[
            "plan",
            "examples/small_cnn.json",
            "--planner",
            "npu",
            "--slack",
            "any",
        ][..],
        &[
            "plan",
            "examples/small_cnn.json",
            "--planner",
            "npu:slack=25",
        ][..],
        &[
            "plan",
            "examples/small_cnn.json",
            "--planner",
            "npu:match=lifetime:slack=0",
        ][..],
    ] {
        let out = memplan(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = stderr(&out);
        assert!(
            err.contains("size match only") && err.contains("--match size"),
            "{err}"
        );
    }
    let out = memplan(&[
        "plan",
        "examples/small_cnn.json",
        "--planner",
        "npu:match=size:slack=25",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("size, slack 25%"), "{}", stdout(&out));
    let out = memplan(&["plan", "examples/small_cnn.json", "--help"]);
    let help = stdout(&out);
    assert!(
        help.contains("deviation") && help.contains("exact"),
        "{help}"
    );
}

#[test]
fn bad_platform_files_are_errors_naming_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (r#"{"accelerated": ["Conv"], "inplace": []}"#, "inplace"),
        (
            r#"{"accelerated": ["conv2d"]}"#,
            "'accelerated', entry 0: 'conv2d'",
        ),
        (
            r#"{"in_place": ["Relu", "Softmax"]}"#,
            "'in_place', entry 1: 'Softmax'",
        ),
        (r#"{"alignment": 0}"#, "'alignment'"),
        (r#"{"plan_weights": 1}"#, "'plan_weights'"),
        (r#"{"weight_lifetime": "forever"}"#, "'weight_lifetime'"),
    ];
    for (i, (text, needle)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("platform{i}.json"));
        std::fs::write(&path, text).unwrap();
        let path = path.to_str().unwrap();
        for args in [
            &[
                "plan",
                "examples/small_cnn.json",
                "--planner",
                "npu",
                "--platform",
                path,
            ][..],
            &[
                "inspect",
                "--operators",
                "examples/small_cnn.json",
                "--platform",
                path,
            ][..],
        ] {
            let out = memplan(args);
            assert_eq!(out.status.code(), Some(2), "{text}");
            let err = stderr(&out);
            assert!(err.contains(path) && err.contains(needle), "{err}");
        }
    }
    let out = memplan(&["plan", "examples/small_cnn.json", "--match", "lifetime"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--planner npu only"),
        "{}",
        stderr(&out)
    );
    let out = memplan(&[
        "plan",
        "examples/small_cnn.json",
        "--planner",
        "npu",
        "--platform",
        "no/such/platform.json",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no/such/platform.json"),
        "{}",
        stderr(&out)
    );
}

/// `bench` runs npu beside the other graph planners on the shipped models, every plan
/// checked (two models here; doc/npu.md has all seven).
#[test]
fn bench_runs_npu_on_models() {
    let Some(models) = shared_models() else {
        return;
    };
    let files: Vec<String> = ["squeezenet1_1.onnx", "resnet18.onnx"]
        .iter()
        .map(|m| models.join(m).display().to_string())
        .collect();
    for rule in ["size", "lifetime"] {
        let mut args = vec!["bench"];
        args.extend(files.iter().map(String::as_str));
        args.extend(["--planners", "naive,best-of,exclusive,npu", "-f", "json"]);
        args.extend(["--match", rule]);
        let out = memplan(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        let rows: Vec<serde_json::Value> = stdout(&out)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(rows.len(), 8);
        for row in rows.iter().filter(|r| r["planner"] == "npu") {
            let arena = row["arena_bytes"].as_u64().unwrap();
            assert!(arena >= row["lower_bound_bytes"].as_u64().unwrap(), "{row}");
        }
    }
}

/// Plans `examples/exclusive_example.json` with `exclusive` into `dir/plan.json` (extra
/// arguments appended) and returns the plan's path.
fn exclusive_plan_file(dir: &Path, extra: &[&str]) -> PathBuf {
    let plan = dir.join("plan.json");
    let mut args = vec![
        "plan",
        "examples/exclusive_example.json",
        "--planner",
        "exclusive",
        "-f",
        "json",
        "-o",
        plan.to_str().unwrap(),
    ];
    args.extend(extra);
    let out = memplan(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    plan
}

#[test]
fn check_accepts_an_exclusive_plan_file() {
    let dir = tempfile::tempdir().unwrap();
    for rules in ["edges,branches,outputs", "none"] {
        let plan = exclusive_plan_file(dir.path(), &["--exclusive-rules", rules]);
        let text = std::fs::read_to_string(&plan).unwrap();
        assert!(
            text.contains(&format!("\"exclusive_rules\": \"{rules}\"")),
            "{text}"
        );
        // The rules come from the plan, not from the command line of `check`.
        let out = memplan(&[
            "check",
            "examples/exclusive_example.json",
            plan.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
        let text = stdout(&out).replace(plan.to_str().unwrap(), "<PLAN>");
        assert!(text.starts_with("valid: '<PLAN>'"), "{text}");
        let shown = if rules == "none" {
            "live".to_string()
        } else {
            format!("{rules},live")
        };
        assert!(
            text.contains(&format!("(rules {shown}, from the plan)")),
            "{text}"
        );
    }
}

#[test]
fn check_rejects_an_exclusive_plan_that_shares_an_exclusive_pair() {
    let dir = tempfile::tempdir().unwrap();
    let plan = exclusive_plan_file(dir.path(), &[]);
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    // op4 and op7 are joined by an edge; put op7 on op4's bytes.
    let buffers = value["buffers"].as_array_mut().unwrap();
    let at = |id: &str| buffers.iter().position(|b| b["id"] == id).unwrap();
    let (op4, op7) = (at("op4"), at("op7"));
    buffers[op7]["offset"] = buffers[op4]["offset"].clone();
    // Its top (offset + size) moves with it, or the reader stops at the wrong top.
    let top = buffers[op7]["offset"].as_u64().unwrap() + buffers[op7]["size"].as_u64().unwrap();
    buffers[op7]["top"] = top.into();
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, serde_json::to_string_pretty(&value).unwrap()).unwrap();
    let out = memplan(&[
        "check",
        "examples/exclusive_example.json",
        broken.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out).replace(broken.to_str().unwrap(), "<PLAN>");
    assert!(
        text.contains("operators 'n_op4' and 'n_op7' are exclusive (rule edges)"),
        "{text}"
    );
    golden("check_exclusive_broken.txt", &text);

    // A plan that says it is exclusive but not under which rules cannot be rebuilt.
    value.as_object_mut().unwrap().remove("exclusive_rules");
    std::fs::write(&broken, serde_json::to_string_pretty(&value).unwrap()).unwrap();
    let out = memplan(&[
        "check",
        "examples/exclusive_example.json",
        broken.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("does not record its \"exclusive_rules\""),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_fragmented_exclusive_plan_round_trips_through_check() {
    let dir = tempfile::tempdir().unwrap();
    let plan = exclusive_plan_file(dir.path(), &["--fragmented"]);
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert_eq!(value["fragmented"], true);
    // the `exclusive` method's example: 46 MiB with or without fragments.
    assert_eq!(value["arena_bytes"], 46 << 20);
    assert!(value["buffers"]
        .as_array()
        .unwrap()
        .iter()
        .all(|b| b["extents"].is_array()));
    let out = memplan(&[
        "check",
        "examples/exclusive_example.json",
        plan.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));

    // op7's extent moved onto op4's bytes: rejected, naming both blocks and operators.
    let buffers = value["buffers"].as_array_mut().unwrap();
    let at = |id: &str| buffers.iter().position(|b| b["id"] == id).unwrap();
    let (op4, op7) = (at("op4"), at("op7"));
    let target = buffers[op4]["offset"].clone();
    buffers[op7]["offset"] = target.clone();
    buffers[op7]["extents"][0]["offset"] = target;
    // Files without tops are read too (and a moved extent's top would be wrong).
    buffers[op7].as_object_mut().unwrap().remove("top");
    buffers[op7]["extents"][0]
        .as_object_mut()
        .unwrap()
        .remove("top");
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, serde_json::to_string_pretty(&value).unwrap()).unwrap();
    let out = memplan(&[
        "check",
        "examples/exclusive_example.json",
        broken.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("operators 'n_op4' and 'n_op7' are exclusive"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn fragmented_applies_to_the_exclusive_planner_only() {
    let out = memplan(&["plan", "examples/small_cnn.json", "--fragmented"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--fragmented applies to --planner exclusive only"),
        "{}",
        stderr(&out)
    );
    let out = memplan(&[
        "bench",
        "examples/small_cnn.json",
        "--planners",
        "naive",
        "--fragmented",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let out = memplan(&[
        "bench",
        "examples/exclusive_example.json",
        "--planners",
        "naive,exclusive",
        "--fragmented",
        "-f",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("\"arena_bytes\":48234496"),
        "{}",
        stdout(&out)
    );
}

/// Variants of a planner are columns of one bench, named by their specs; every plan is
/// checked inside `bench`.
#[test]
fn bench_with_planner_variants_golden() {
    let out = memplan(&[
        "bench",
        "examples/exclusive_example.json",
        "examples/small_cnn.json",
        "--planners",
        "naive,exclusive,exclusive:rules=edges+outputs,exclusive:fragmented,npu,npu:match=lifetime,npu:platform=platforms/npu-pooled.json:match=lifetime",
        "-f",
        "markdown",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    golden("bench_variants_markdown.txt", &stdout(&out));
    // A variant equals the plain planner run with the same flags.
    let json = |args: &[&str]| -> Vec<serde_json::Value> {
        let mut all = vec!["bench", "examples/small_cnn.json", "-f", "json"];
        all.extend(args);
        let out = memplan(&all);
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let variant = json(&[
        "--planners",
        "npu:platform=platforms/npu-pooled.json:match=lifetime",
    ]);
    let flags = json(&[
        "--planners",
        "npu",
        "--platform",
        "platforms/npu-pooled.json",
        "--match",
        "lifetime",
    ]);
    assert_eq!(
        variant[0]["planner"],
        "npu:platform=platforms/npu-pooled.json:match=lifetime"
    );
    assert_eq!(flags[0]["planner"], "npu");
    assert_eq!(variant[0]["arena_bytes"], flags[0]["arena_bytes"]);
    let variant = json(&["--planners", "exclusive:rules=edges"]);
    let flags = json(&["--planners", "exclusive", "--exclusive-rules", "edges"]);
    assert_eq!(variant[0]["arena_bytes"], flags[0]["arena_bytes"]);
    // `plan` takes the same specs.
    let out = memplan(&[
        "plan",
        "examples/small_cnn.json",
        "--planner",
        "npu:platform=platforms/npu-pooled.json:match=lifetime",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    golden(
        "plan_npu_pooled_lifetime_small_cnn_table.txt",
        &stdout(&out),
    );
}

#[test]
fn bad_planner_specs_exit_2_naming_planner_and_option() {
    for (spec, needles) in [
        ("exclusive:colour=red", &["'exclusive'", "'colour'"][..]),
        ("npu:match=closest", &["'npu'", "'match'", "'closest'"][..]),
        ("naive:rules=edges", &["'naive'", "'rules'"][..]),
        ("exclusive:rules=edges,outputs", &["'outputs'", "'+'"][..]),
    ] {
        let out = memplan(&["bench", "examples/small_cnn.json", "--planners", spec]);
        assert_eq!(out.status.code(), Some(2), "{spec}");
        let err = stderr(&out);
        for needle in needles {
            assert!(err.contains(needle), "{spec}: {err}");
        }
    }
}

/// A platform with `plan_weights`: the weights of accelerated operators (small_cnn's
/// Conv and Gemm weights) are tensors of the plan JSON and of the C header, `check` with
/// the platform checks them (a weight moved onto a live tensor is refused), and without
/// the field they are not planned. The `flat_shape` constant is read by Reshape only.
#[test]
fn npu_plans_the_weights_of_accelerated_operators_when_the_platform_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let platform = dir.path().join("weights.json");
    std::fs::write(
        &platform,
        r#"{"name": "weights", "accelerated": ["Conv", "Gemm"], "in_place": ["Relu", "Add"], "alignment": 64, "plan_weights": true}"#,
    )
    .unwrap();
    let plan = dir.path().join("plan.json");
    let (platform_s, plan_s) = (platform.to_str().unwrap(), plan.to_str().unwrap());
    let model = "examples/small_cnn.json";
    let args = ["plan", model, "--planner", "npu", "--platform", platform_s];
    let out = memplan(&[&args[..], &["-f", "json", "-o", plan_s]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    let names: Vec<&str> = value["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for w in ["conv1.w", "conv2.w", "fc.w"] {
        assert!(names.contains(&w), "{w} missing from {names:?}");
    }
    assert!(!names.contains(&"flat_shape"), "{names:?}");
    assert_eq!(value["plan_weights"], true);
    assert_eq!(value["weight_lifetime"], "uses");
    let out = memplan(&[&args[..], &["-f", "c"]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("conv1_w"), "{}", stdout(&out));
    let out = memplan(&["check", model, plan_s, "--platform", platform_s]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    // Put the fc weight's block at the offset of a block live at the same step: refused.
    let mut broken = value.clone();
    let fc = value["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "fc.w")
        .unwrap()
        .clone();
    let logits = value["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "logits")
        .unwrap()
        .clone();
    let buffers = broken["buffers"].as_array_mut().unwrap();
    let fc_block = buffers
        .iter()
        .position(|b| b["id"] == "fc.w")
        .expect("fc.w is a block of the plan");
    buffers[fc_block]["offset"] = logits["offset"].clone();
    buffers[fc_block].as_object_mut().unwrap().remove("top");
    assert_ne!(fc["offset"], logits["offset"]);
    let broken_path = dir.path().join("broken.json");
    std::fs::write(&broken_path, serde_json::to_string(&broken).unwrap()).unwrap();
    let out = memplan(&[
        "check",
        model,
        broken_path.to_str().unwrap(),
        "--platform",
        platform_s,
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    // The same platform without the field: no weight in the plan.
    std::fs::write(
        &platform,
        r#"{"name": "weights", "accelerated": ["Conv", "Gemm"], "in_place": ["Relu", "Add"], "alignment": 64}"#,
    )
    .unwrap();
    let out = memplan(&[&args[..], &["-f", "json"]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let value: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(value["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| !t["name"].as_str().unwrap().ends_with(".w")));
    // A wrong type names the file and the key.
    std::fs::write(&platform, r#"{"plan_weights": "yes"}"#).unwrap();
    let out = memplan(&args);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains(platform_s) && err.contains("'plan_weights'"),
        "{err}"
    );
}

/// An npu plan made with a platform file records it, and `check` rebuilds the problem of
/// that platform (its in-place list and alignment), or says to pass `--platform`.
#[test]
fn check_rebuilds_the_problem_of_an_npu_plans_platform() {
    let dir = tempfile::tempdir().unwrap();
    let platform = dir.path().join("no-inplace.json");
    std::fs::write(
        &platform,
        r#"{"name": "no-inplace", "accelerated": ["Conv"], "in_place": [], "alignment": 128}"#,
    )
    .unwrap();
    let plan = dir.path().join("plan.json");
    let (platform_s, plan_s) = (platform.to_str().unwrap(), plan.to_str().unwrap());
    let model = "examples/small_cnn.json";
    let out = memplan(&[
        "plan",
        model,
        "--planner",
        "npu",
        "--platform",
        platform_s,
        "-f",
        "json",
        "-o",
        plan_s,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert_eq!(value["platform"], "no-inplace");
    assert_eq!(value["platform_file"], platform_s);
    // Without in-place the graph has more blocks than the default analysis: the plan only
    // fits the problem rebuilt with the recorded platform.
    let default_blocks = memplan(&["bound", model, "-f", "json"]);
    let default_blocks: serde_json::Value = serde_json::from_str(&stdout(&default_blocks)).unwrap();
    let blocks = value["buffers"].as_array().unwrap().len();
    assert!(blocks as u64 > default_blocks["buffers"].as_u64().unwrap());
    // A plan is data: the file it names is not opened unless passed on the command line.
    let out = memplan(&["check", model, plan_s]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains(platform_s) && err.contains("does not open files named inside a plan"),
        "{err}"
    );
    let out = memplan(&["check", model, plan_s, "--platform", platform_s]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("npu plan (platform no-inplace"),
        "{}",
        stdout(&out)
    );
    // The platform's alignment is checked: move a block off the 128-byte grid.
    let mut broken = value.clone();
    let buffers = broken["buffers"].as_array_mut().unwrap();
    let top = buffers
        .iter()
        .map(|b| b["offset"].as_u64().unwrap() + b["size"].as_u64().unwrap())
        .max()
        .unwrap();
    buffers[0]["offset"] = serde_json::json!(top + 64);
    // A moved block's `top` would no longer be offset + size: leave it out (optional).
    buffers[0].as_object_mut().unwrap().remove("top");
    let arena = top + 64 + buffers[0]["size"].as_u64().unwrap();
    broken["arena_bytes"] = serde_json::json!(arena);
    let broken_path = dir.path().join("broken.json");
    std::fs::write(&broken_path, serde_json::to_string(&broken).unwrap()).unwrap();
    let out = memplan(&[
        "check",
        model,
        broken_path.to_str().unwrap(),
        "--platform",
        platform_s,
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("breaks 1 rule(s)")
            && stdout(&out).contains("is not a multiple of its alignment 128"),
        "{}",
        stdout(&out)
    );
    // Another platform is refused, naming both.
    let out = memplan(&[
        "check",
        model,
        plan_s,
        "--platform",
        "platforms/npu-pooled.json",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("'no-inplace'") && err.contains("'npu-pooled'"),
        "{err}"
    );
    // The recorded file is gone: the error says what to pass; --platform then works.
    let moved = dir.path().join("moved.json");
    std::fs::rename(&platform, &moved).unwrap();
    let out = memplan(&["check", model, plan_s]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains(platform_s) && err.contains("--platform"),
        "{err}"
    );
    let out = memplan(&[
        "check",
        model,
        plan_s,
        "--platform",
        moved.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    // A plan of the built-in default records no file and is checked without flags.
    let out = memplan(&[
        "plan",
        model,
        "--planner",
        "npu",
        "-f",
        "json",
        "-o",
        plan_s,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert!(value["platform_file"].is_null(), "{value}");
    let out = memplan(&["check", model, plan_s]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
}

#[test]
fn platform_applies_to_npu_plans_and_operators_only() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    let plan_s = plan.to_str().unwrap();
    let model = "examples/small_cnn.json";
    let pooled = "platforms/npu-pooled.json";
    for format in ["json", "csv"] {
        let out = memplan(&["plan", model, "-f", format, "-o", plan_s]);
        assert!(out.status.success(), "{}", stderr(&out));
        let out = memplan(&["check", model, plan_s, "--platform", pooled]);
        assert_eq!(out.status.code(), Some(2), "{format}");
        assert!(
            stderr(&out).contains("--planner npu only"),
            "{}",
            stderr(&out)
        );
    }
    let out = memplan(&["inspect", model, "--platform", pooled]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--operators"), "{}", stderr(&out));
    let out = memplan(&["inspect", model, "--operators", "--platform", pooled]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn data_dependent_sizes_are_marked_as_upper_bounds() {
    // NonMaxSuppression, NonZero and TopK with a runtime k (memplan-onnx's detection
    // fixture): inspect marks the bounded tensors, plan notes them on stderr.
    let file = "crates/memplan-onnx/tests/data/ops/detection.onnx";
    let out = memplan(&["inspect", file, "--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sel = json["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "sel")
        .unwrap();
    assert_eq!(sel["shape"], serde_json::json!([12, 3]));
    assert!(sel["upper_bound"]
        .as_str()
        .unwrap()
        .contains("max_output_boxes_per_class = 4"));
    let out = memplan(&["plan", file]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("13 tensors have data-dependent sizes"),
        "{err}"
    );
    // --max-dim is accepted and does not change sizes the graph bounds itself.
    let out = memplan(&["inspect", file, "--max-dim", "1000", "--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(again["tensors"], json["tensors"]);
    let out = memplan(&["inspect", file, "--max-dim", "x"]);
    assert!(!out.status.success());
}

// ---------------------------------------------------------------------------------------
// Memory-operation sequences, tensor addresses, --base, C headers.

#[test]
fn plan_memops_json_golden_lists_tensor_addresses_and_checks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.json");
    let out = memplan(&[
        "plan",
        "examples/memops.csv",
        "--planner",
        "strip:order=ascending:placement=stacked",
        "--format",
        "json",
        "--base",
        "0x20000000",
        "-o",
        path.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&path).unwrap();
    golden("plan_memops_strip_json.txt", &text);
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["base_address"], 0x2000_0000u64);
    assert_eq!(value["order"], "ascending");
    assert_eq!(value["placement"], "stacked");
    let buffers = value["buffers"].as_array().unwrap();
    let tensors = value["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), buffers.len());
    for (t, b) in tensors.iter().zip(buffers) {
        assert_eq!(t["name"], b["id"]);
        let offset = b["offset"].as_u64().unwrap();
        assert_eq!(t["offset"].as_u64(), Some(offset));
        assert_eq!(t["address"].as_u64(), Some(0x2000_0000 + offset));
    }
    // The existing reader and checker take the plan as before.
    let out = memplan(&["check", "examples/memops.csv", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn exclusive_plans_give_every_tensor_its_block_and_address() {
    let out = memplan(&[
        "plan",
        "examples/small_cnn.json",
        "--planner",
        "exclusive",
        "--format",
        "json",
        "--base",
        "4096",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let offset_of = |block: &str| {
        value["buffers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["id"] == block)
            .and_then(|b| b["offset"].as_u64())
            .unwrap()
    };
    let tensors = value["tensors"].as_array().unwrap();
    assert!(tensors.len() > value["buffers"].as_array().unwrap().len());
    for t in tensors {
        let offset = offset_of(t["block"].as_str().unwrap());
        assert_eq!(t["offset"].as_u64(), Some(offset), "{t}");
        assert_eq!(t["address"].as_u64(), Some(4096 + offset), "{t}");
    }
}

#[test]
fn pool_traces_plan_like_other_inputs() {
    for command in [
        vec!["plan", "examples/pool_trace.csv", "--planner", "strip"],
        vec!["bound", "examples/pool_trace.csv"],
        vec![
            "bench",
            "examples/pool_trace.csv",
            "--planners",
            "strip,best-of",
        ],
    ] {
        let out = memplan(&command);
        assert!(out.status.success(), "{command:?}: {}", stderr(&out));
    }
}

#[test]
fn bad_memory_operations_name_file_line_and_fix() {
    let dir = tempfile::tempdir().unwrap();
    for (text, want) in [
        (
            "op,tensor,size\nalloc,a,4\nfree,b,\n",
            ":3: column 'tensor': free of 'b', which was never allocated",
        ),
        (
            "op,tensor,size\nalloc,a,4\nalloc,a,4\n",
            ":3: column 'tensor': 'a' is allocated again",
        ),
        (
            "op,tensor,size\nalloc,a,four\n",
            ":2: column 'size': 'four' is not a number",
        ),
    ] {
        let path = dir.path().join("ops.csv");
        std::fs::write(&path, text).unwrap();
        for command in ["plan", "bound"] {
            let out = memplan(&[command, path.to_str().unwrap()]);
            assert_eq!(out.status.code(), Some(2));
            let err = stderr(&out);
            assert!(err.contains("ops.csv") && err.contains(want), "{err}");
        }
    }
}

#[test]
fn base_addresses_are_checked() {
    let out = memplan(&["plan", "examples/small.csv", "--base", "0xffffffffffffff00"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("exceeds 2^64"), "{}", stderr(&out));
    let out = memplan(&["plan", "examples/small.csv", "--base", "12x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("not an address"), "{}", stderr(&out));
    let out = memplan(&["plan", "examples/small.csv", "--base", "16", "-f", "csv"]);
    assert_eq!(out.status.code(), Some(2));
    let out = memplan(&[
        "plan",
        "examples/small.csv",
        "--base",
        "0x100",
        "-p",
        "strip",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("0x100"), "{}", stdout(&out));
}

#[test]
fn c_header_golden_for_hostile_names() {
    let out = memplan(&[
        "plan",
        "crates/memplan-cli/tests/data/hostile_names.csv",
        "--planner",
        "naive",
        "--format",
        "c",
        "--base",
        "0x8000",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    golden("plan_hostile_names_c.txt", &stdout(&out));
}

/// Generated headers compile as C99 and C11 under -Wall -Wextra -Werror, included twice
/// (the guard), with every macro used.
#[test]
fn c_headers_compile() {
    let Some(cc) = ["cc", "gcc", "clang"].into_iter().find(|cc| {
        Command::new(cc)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    }) else {
        eprintln!("skipping: no C compiler (cc, gcc or clang) found on PATH");
        return;
    };
    let mut inputs = vec![
        (
            "crates/memplan-cli/tests/data/hostile_names.csv",
            "naive",
            Some("0x8000"),
        ),
        ("examples/small_cnn.json", "exclusive", None),
        ("examples/memops.csv", "strip", Some("4096")),
        // A fragmented plan: piece counts and brace-enclosed piece lists too.
        (
            "crates/memplan-cli/tests/data/fragmented.json",
            "exclusive:fragmented",
            Some("0x1000"),
        ),
    ];
    let zoo = root().join("../shared/models/mobilenet_v2.onnx");
    let zoo_text = zoo.display().to_string();
    if zoo.is_file() {
        inputs.push((zoo_text.as_str(), "best-of", Some("0x20000000")));
    } else {
        eprintln!(
            "note: {} not found; the zoo model is not compiled",
            zoo.display()
        );
    }
    let dir = tempfile::tempdir().unwrap();
    for (k, (file, planner, base)) in inputs.into_iter().enumerate() {
        let header = dir.path().join(format!("plan{k}.h"));
        let mut args = vec!["plan", file, "--planner", planner, "--format", "c", "-o"];
        let header_text = header.to_str().unwrap().to_string();
        args.push(&header_text);
        if let Some(base) = base {
            args.extend(["--base", base]);
        }
        let out = memplan(&args);
        assert!(out.status.success(), "{file}: {}", stderr(&out));
        let text = std::fs::read_to_string(&header).unwrap();
        let names: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("#define "))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|name| !name.ends_with("_H"))
            .collect();
        // Piece lists are initializers: each fills an array, whose first element is used.
        let (lists, scalars): (Vec<&str>, Vec<&str>) = names
            .into_iter()
            .partition(|name| name.starts_with("MEMPLAN_PIECE_"));
        let mut uses: Vec<String> = scalars
            .iter()
            .map(|name| format!("(unsigned long long)({name})"))
            .collect();
        let mut arrays = String::new();
        for (j, name) in lists.iter().enumerate() {
            arrays.push_str(&format!("static const uint64_t list{j}[] = {name};\n"));
            uses.push(format!("(unsigned long long)list{j}[0]"));
        }
        assert!(uses.len() >= 4, "{text}");
        let unit = dir.path().join(format!("use{k}.c"));
        std::fs::write(
            &unit,
            format!(
                "#include \"plan{k}.h\"\n#include \"plan{k}.h\"\n{arrays}unsigned long long sum{k}(void);\nunsigned long long sum{k}(void) {{ return {}; }}\n",
                uses.join(" + ")
            ),
        )
        .unwrap();
        for std in ["-std=c99", "-std=c11"] {
            let out = Command::new(cc)
                .args([std, "-Wall", "-Wextra", "-Werror", "-pedantic", "-c"])
                .arg(&unit)
                .arg("-o")
                .arg(dir.path().join(format!("use{k}.o")))
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{file} ({std}): {}\n{text}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

#[test]
fn inspect_memops_golden() {
    let out = memplan(&["inspect", "examples/memops.csv"]);
    assert!(out.status.success(), "{}", stderr(&out));
    golden("inspect_memops_table.txt", &stdout(&out));
    let out = memplan(&["inspect", "examples/memops.csv", "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(value["totals"]["max_live_bytes"], 1_605_632);
    assert_eq!(value["totals"]["largest_tensor"], "conv1");
}

/// `exclusive:orders=all`: its plan passes `check` (which runs the all-orders check for
/// it); the ordinary plan of the same example, relabelled as all-orders, is rejected,
/// because op2 and op7 share bytes although op5 (a reader of op2) may run after op7.
#[test]
fn all_orders_plans_are_checked_for_every_order() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("all.json");
    let out = memplan(&[
        "plan",
        "examples/exclusive_example.json",
        "--planner",
        "exclusive:orders=all",
        "-f",
        "json",
        "-o",
        plan.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert_eq!(value["exclusive_orders"], "all");
    let out = memplan(&[
        "check",
        "examples/exclusive_example.json",
        plan.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );

    let ordinary = dir.path().join("one.json");
    let out = memplan(&[
        "plan",
        "examples/exclusive_example.json",
        "--planner",
        "exclusive",
        "-f",
        "json",
        "-o",
        ordinary.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&ordinary).unwrap()).unwrap();
    assert_eq!(value["exclusive_orders"], "one");
    let out = memplan(&[
        "check",
        "examples/exclusive_example.json",
        ordinary.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    value["exclusive_orders"] = serde_json::json!("all");
    let relabelled = dir.path().join("relabelled.json");
    std::fs::write(&relabelled, serde_json::to_string_pretty(&value).unwrap()).unwrap();
    let out = memplan(&[
        "check",
        "examples/exclusive_example.json",
        relabelled.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("all orders: buffers 'op2' and 'op7' share addresses"),
        "{}",
        stdout(&out)
    );
}

/// The counterexample of the every-order mode with in-place on (the default): `a` is read
/// by `B` and by `C = Relu(a)`. For the file order A, B, C, D, `c` may be written over `a`;
/// in the order A, C, B, D it may not. The mode keeps them apart, its plan checks, and the
/// same plan with `c` moved onto `a` is rejected by `check` tensor by tensor.
#[test]
fn every_order_mode_never_writes_in_place_over_a_branch_still_pending() {
    let dir = tempfile::tempdir().unwrap();
    let model = "crates/memplan-cli/tests/data/inplace_branches.json";
    let plan = dir.path().join("all.json");
    let out = memplan(&[
        "plan",
        model,
        "--planner",
        "exclusive:orders=all",
        "-f",
        "json",
        "-o",
        plan.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    let offset = |value: &serde_json::Value, name: &str| {
        value["buffers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["id"] == name)
            .unwrap_or_else(|| panic!("no buffer '{name}' in {value}"))["offset"]
            .as_u64()
            .unwrap()
    };
    let (a, c) = (offset(&value, "a"), offset(&value, "c"));
    assert!(a.abs_diff(c) >= 64, "a at {a} and c at {c} overlap");
    let out = memplan(&["check", model, plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("every tensor in every order"),
        "{}",
        stdout(&out)
    );
    for b in value["buffers"].as_array_mut().unwrap() {
        if b["id"] == "c" {
            b["offset"] = serde_json::json!(a);
            b["top"] = serde_json::json!(a + 64);
        }
    }
    let moved = dir.path().join("moved.json");
    std::fs::write(&moved, serde_json::to_string_pretty(&value).unwrap()).unwrap();
    let out = memplan(&["check", model, moved.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("all orders: buffers 'a' and 'c' share addresses"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn search_node_limit_with_one_thread_is_deterministic() {
    let file = root().join("../shared/benchmarks/minimalloc/challenging/D.1048576.csv");
    if !file.exists() {
        eprintln!("skipping: ../shared not found");
        return;
    }
    let run = || {
        let out = memplan(&[
            "plan",
            file.to_str().unwrap(),
            "--planner",
            "search",
            "--threads",
            "1",
            "--node-limit",
            "20000",
            "--time-limit",
            "600",
            "--format",
            "json",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let (first, second) = (run(), run());
    assert_eq!(first["search_stop"], "node-limit");
    assert!(first["search_nodes"].as_u64().unwrap() >= 20_000);
    assert_eq!(first["arena_bytes"], second["arena_bytes"]);
    assert_eq!(first["buffers"], second["buffers"]);
}

/// Issue #17's done-when: every method plans each of the seven shared models (the bench
/// checks every plan it makes and fails on an invalid one), and `npu` with the default
/// platform stays within 1.25 times the lower bound on each.
#[test]
fn done_when_every_method_plans_the_seven_models_and_npu_is_within_1_25() {
    let Some(models) = shared_models() else {
        return;
    };
    let names = reference_models(&models);
    assert_eq!(names.len(), 7);
    let files: Vec<String> = names
        .iter()
        .map(|(model, _)| models.join(format!("{model}.onnx")).display().to_string())
        .collect();
    let planners = ["naive", "best-of", "exclusive", "npu", "strip"];
    let mut args = vec!["bench"];
    args.extend(files.iter().map(String::as_str));
    let list = planners.join(",");
    args.extend(["--planners", &list, "-f", "json"]);
    let out = memplan(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let rows: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), files.len() * planners.len());
    for row in &rows {
        let arena = row["arena_bytes"].as_u64().unwrap();
        let bound = row["lower_bound_bytes"].as_u64().unwrap();
        assert!(arena >= bound, "{row}");
        if row["planner"] == "npu" {
            assert!(arena * 4 <= bound * 5, "npu above 1.25x the bound: {row}");
        }
    }
}

/// Decision mode: the exit status says whether a plan fits, and the message says what
/// was found and what was proven (it printed "arena N bytes" for a run that found no
/// plan below the capacity).
#[test]
fn capacity_verdicts_say_what_was_found_and_proven() {
    let run = |capacity: &str| {
        memplan(&[
            "plan",
            "examples/small.csv",
            "--planner",
            "search",
            "--threads",
            "1",
            "--capacity",
            capacity,
            "-o",
            "/dev/null",
        ])
    };
    let out = run("1");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("no plan fits (proven: no arena below 14336 bytes exists)")
            && err.contains("the best found, 14336 bytes, above the capacity"),
        "{err}"
    );
    let out = run("100000");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("a plan fits: its arena is 14336 bytes"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn completions_cover_every_subcommand_and_parse() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = memplan(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", stderr(&out));
        let script = stdout(&out);
        for word in [
            "plan",
            "report",
            "check",
            "bound",
            "inspect",
            "bench",
            "swap",
            "--planner",
        ] {
            assert!(script.contains(word), "{shell}: no '{word}'");
        }
    }
    // The bash script is valid bash.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memplan.bash");
    std::fs::write(&path, stdout(&memplan(&["completions", "bash"]))).unwrap();
    if let Ok(check) = Command::new("bash").arg("-n").arg(&path).output() {
        assert!(
            check.status.success(),
            "{}",
            String::from_utf8_lossy(&check.stderr)
        );
    }
    let out = memplan(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("possible values"));
}

/// `memplan` with `input` on standard input.
fn memplan_stdin(args: &[&str], input: &[u8]) -> Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_memplan"))
        .args(args)
        .current_dir(root())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the memplan binary runs");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

#[test]
fn a_dash_reads_standard_input_of_every_kind() {
    let files = [
        "examples/small.csv",
        "examples/memops.csv",
        "examples/small_cnn.json",
        "crates/memplan-onnx/tests/data/small.onnx",
        "crates/memplan-tflite/tests/data/branchy.tflite",
    ];
    for file in files {
        let bytes = std::fs::read(root().join(file)).unwrap();
        let from_file = memplan(&["plan", file, "-p", "best-of", "-f", "json"]);
        let from_stdin = memplan_stdin(&["plan", "-", "-p", "best-of", "-f", "json"], &bytes);
        assert!(
            from_stdin.status.success(),
            "{file}: {}",
            stderr(&from_stdin)
        );
        let offsets = |out: &Output| {
            let plan: serde_json::Value = serde_json::from_str(&stdout(out)).unwrap();
            plan["buffers"].clone()
        };
        assert_eq!(offsets(&from_file), offsets(&from_stdin), "{file}");
    }
    // check: the problem or the plan from standard input, not both.
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    let plan = plan.to_str().unwrap();
    assert!(
        memplan(&["plan", "examples/small.csv", "-f", "json", "-o", plan])
            .status
            .success()
    );
    let csv = std::fs::read(root().join("examples/small.csv")).unwrap();
    assert!(memplan_stdin(&["check", "-", plan], &csv).status.success());
    let text = std::fs::read(plan).unwrap();
    assert!(memplan_stdin(&["check", "examples/small.csv", "-"], &text)
        .status
        .success());
    let both = memplan_stdin(&["check", "-", "-"], &csv);
    assert_eq!(both.status.code(), Some(2));
    assert!(stderr(&both).contains("cannot both be read from standard input"));
    // Garbage and emptiness are clear errors, not panics.
    for input in [&b""[..], b"\n", b"\xff\xfe\x00\x01garbage"] {
        let out = memplan_stdin(&["plan", "-"], input);
        assert_eq!(out.status.code(), Some(2), "{input:?}");
        assert!(!stderr(&out).contains("panicked"), "{input:?}");
    }
}

/// Progress is for people: a bar on a terminal, nothing on a pipe or file (scripts that
/// capture stderr get only warnings and errors).
#[test]
fn progress_is_silent_when_stderr_is_not_a_terminal() {
    let runs: [&[&str]; 4] = [
        &["plan", "examples/small.csv"],
        &[
            "plan",
            "examples/mobilenet_v2.csv",
            "-p",
            "search",
            "--time-limit",
            "0.5",
        ],
        &["pool", "sweep", "examples/pool_trace.csv"],
        &["bound", "examples/small.csv"],
    ];
    for args in runs {
        let out = memplan(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        assert_eq!(stderr(&out), "", "{args:?}");
    }
}

/// The read cap of text inputs is a flag: lowered here (a test cannot write 4 GB), the
/// error says which file and how to raise it.
#[test]
fn the_input_cap_is_named_and_can_be_changed() {
    let out = memplan(&["--max-input-bytes", "100", "plan", "examples/small.csv"]);
    assert_eq!(out.status.code(), Some(2));
    let text = stderr(&out);
    assert!(
        text.contains("'examples/small.csv' is larger than 100 bytes"),
        "{text}"
    );
    assert!(text.contains("--max-input-bytes"), "{text}");
    let out = memplan(&["plan", "examples/small.csv", "--max-input-bytes", "1KiB"]);
    assert!(out.status.success(), "{}", stderr(&out));
}
