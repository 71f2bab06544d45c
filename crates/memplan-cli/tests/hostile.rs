//! Hostile inputs to the `memplan` binary (issue #18): each must end in a clear error or
//! a correct answer, never a panic, a hang or unbounded reading.

use std::path::PathBuf;
use std::process::{Command, Output};

fn memplan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memplan"))
        .args(args)
        .output()
        .expect("the memplan binary runs")
}

/// A scratch file under the target directory, unique to this test.
fn scratch(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hostile");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn no_panic(out: &Output, what: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("panicked") && out.status.code() != Some(101),
        "{what}: {err}"
    );
}

#[test]
fn names_of_any_length_print_in_every_format() {
    let long = "n".repeat(70_000);
    let csv = format!("id,size,lower,upper\n{long},100,0,2\nb,50,1,3\n");
    let path = scratch("long_names.csv", csv.as_bytes());
    let path = path.to_str().unwrap();
    for format in ["table", "ascii", "json", "csv"] {
        let out = memplan(&["plan", path, "--format", format]);
        no_panic(&out, format);
        assert!(out.status.success(), "{format}");
    }
    for command in ["inspect", "bound"] {
        no_panic(&memplan(&[command, path]), command);
    }
}

#[test]
fn control_characters_in_names_are_escaped_on_the_terminal() {
    let path = scratch("control.csv", b"id,size,lower,upper\na\x1b[2Jb,10,0,2\n");
    let path = path.to_str().unwrap();
    for format in ["table", "ascii"] {
        let out = memplan(&["plan", path, "--format", format]);
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!text.contains('\x1b'), "{format}: raw escape in {text:?}");
        assert!(text.contains("a\\u{1b}[2Jb"), "{format}: {text}");
    }
}

#[test]
fn an_endless_input_fails_at_once() {
    if !std::path::Path::new("/dev/zero").exists() {
        eprintln!("skipped: no /dev/zero here");
        return;
    }
    // (`inspect` takes graphs only and refuses the name before reading.)
    for command in ["plan", "bound", "check"] {
        let mut args = vec![command, "/dev/zero"];
        if command == "check" {
            args.push("/dev/zero");
        }
        let out = memplan(&args);
        no_panic(&out, command);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {err}");
        assert!(
            err.contains("/dev/zero") && err.contains("NUL byte"),
            "{command}: {err}"
        );
    }
}

/// `/dev/zero` named as an ONNX model or a PipeDream profile (through a symlink, so that
/// the extension picks the reader) is refused in its first bytes, never read until memory
/// runs out (both read without bound before).
#[test]
fn an_endless_model_or_profile_fails_at_once() {
    if !std::path::Path::new("/dev/zero").exists() {
        eprintln!("skipped: no /dev/zero here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let onnx = dir.path().join("zero.onnx");
    let profile = dir.path().join("zero.graph.txt");
    for link in [&onnx, &profile] {
        std::os::unix::fs::symlink("/dev/zero", link).unwrap();
    }
    let cases: [(&[&str], &str); 4] = [
        (
            &["plan", onnx.to_str().unwrap()],
            "cannot start a protobuf message",
        ),
        (
            &["inspect", onnx.to_str().unwrap()],
            "cannot start a protobuf message",
        ),
        (
            &["bound", onnx.to_str().unwrap()],
            "cannot start a protobuf message",
        ),
        (&["swap", profile.to_str().unwrap()], "NUL byte"),
    ];
    for (args, expected) in cases {
        let out = memplan(args);
        no_panic(&out, args[0]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}

#[test]
fn negative_numbers_for_numeric_flags_name_the_flag() {
    let cases: &[&[&str]] = &[
        &[
            "plan",
            "examples/small.csv",
            "--planner",
            "search",
            "--time-limit",
            "-5",
        ],
        &["plan", "examples/small.csv", "--alignment", "-64"],
        &["plan", "examples/small.csv", "--threads", "-1"],
        &["bench", "examples/small.csv", "--repeat", "-3"],
    ];
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    for args in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_memplan"))
            .args(*args)
            .current_dir(root)
            .output()
            .unwrap();
        no_panic(&out, args[3]);
        let err = String::from_utf8_lossy(&out.stderr);
        let flag = args
            .iter()
            .find(|a| a.starts_with("--") && **a != "--planner")
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(flag),
            "{args:?}: error does not name {flag}: {err}"
        );
    }
}

#[test]
fn plans_are_held_to_the_alignment_they_record() {
    let problem = scratch(
        "aligned_problem.csv",
        b"id,lower,upper,size\n0,0,2,100\n1,1,3,50\n",
    );
    let problem = problem.to_str().unwrap();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hostile");
    for format in ["csv", "json"] {
        let plan = dir.join(format!("aligned_plan.{format}"));
        let plan = plan.to_str().unwrap();
        let out = memplan(&[
            "plan",
            problem,
            "--planner",
            "best-of",
            "--alignment",
            "64",
            "--format",
            format,
            "-o",
            plan,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // memplan's own aligned plan is accepted back...
        let out = memplan(&["check", problem, plan]);
        assert!(
            out.status.success(),
            "{format}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // ...and the same plan with an offset moved off the alignment is invalid.
        let text = std::fs::read_to_string(plan).unwrap();
        let moved = match format {
            "csv" => text.replace(",64,128", ",64,100"),
            // A `top`, when given, must move with its offset (offset + size).
            _ => text
                .replace("\"offset\": 128", "\"offset\": 100")
                .replace("\"top\": 178", "\"top\": 150"),
        };
        assert_ne!(
            moved, text,
            "{format}: the plan did not put buffer 1 at 128"
        );
        let bad = dir.join(format!("misaligned_plan.{format}"));
        std::fs::write(&bad, moved).unwrap();
        let out = memplan(&["check", problem, bad.to_str().unwrap()]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{format}: {text}");
        assert!(
            text.contains("aligned") || text.contains("alignment"),
            "{format}: {text}"
        );
    }
}

#[test]
fn a_device_outside_any_real_one_is_an_error_not_every_goal_met() {
    let model_onnx = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../memplan-onnx/tests/data/small.onnx"
    ));
    for launch in ["1e308", "1e300"] {
        let out = memplan(&[
            "swap",
            model_onnx.to_str().unwrap(),
            "--launch-us",
            launch,
            "--max-overhead",
            "5%",
        ]);
        no_panic(&out, launch);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{launch}: {err}");
        assert!(err.contains("training step would take"), "{launch}: {err}");
    }
}

/// Issue #18: `--copy-latency 1e308` printed "inf ms"; copy and codec settings that make
/// the simulated step non-finite are errors naming the flag.
#[test]
fn copy_settings_that_make_a_step_infinite_are_errors_naming_the_flag() {
    let graph = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../memplan-swap/tests/data/alexnet.graph.txt"
    ));
    for (flag, value, named) in [
        ("--copy-latency", "1e308", "--copy-latency 1e308 makes"),
        (
            "--link",
            "1e-300B/s",
            "--link-d2h (or --link) 1e-300B/s makes",
        ),
        (
            "--link-h2d",
            "1e-290B/s",
            "--link-h2d (or --link) 1e-290B/s makes",
        ),
        (
            "--codec-speed",
            "1e-300B/s",
            "--codec-speed 1e-300B/s makes",
        ),
    ] {
        let mut args = vec![
            "swap",
            graph.to_str().unwrap(),
            "--planner",
            "method",
            "--budget",
            "50%",
            flag,
            value,
        ];
        if flag == "--codec-speed" {
            args.extend(["--compress", "fp16"]);
        }
        let out = memplan(&args);
        no_panic(&out, value);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {err}");
        assert!(err.contains(named), "{flag} {value}: {err}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("inf ms"));
    }
}

#[test]
fn a_bom_is_accepted_by_every_json_input_and_a_non_object_is_refused() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bom = |name: &str, file: PathBuf| {
        let mut bytes = b"\xef\xbb\xbf".to_vec();
        bytes.extend(std::fs::read(file).unwrap());
        scratch(name, &bytes)
    };
    let graph = bom("bom_graph.json", root.join("examples/small_cnn.json"));
    let platform = bom("bom_platform.json", root.join("platforms/default-npu.json"));
    let graph = graph.to_str().unwrap();
    let platform = platform.to_str().unwrap();
    let out = memplan(&[
        "plan",
        graph,
        "--planner",
        "npu",
        "--platform",
        platform,
        "-f",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut plan = b"\xef\xbb\xbf".to_vec();
    plan.extend(&out.stdout);
    let plan = scratch("bom_plan.json", &plan);
    let out = memplan(&[
        "check",
        graph,
        plan.to_str().unwrap(),
        "--platform",
        platform,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let array = scratch("array.json", b"[]");
    let array = array.to_str().unwrap();
    for args in [
        vec!["plan", array],
        vec!["plan", graph, "--planner", "npu", "--platform", array],
        vec!["check", graph, array],
    ] {
        let out = memplan(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("top level is an array"), "{args:?}: {err}");
    }
}

/// The workspace root, where the examples' paths start.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Commands that print a result on standard output, one per subcommand that does.
fn printing_commands() -> Vec<Vec<&'static str>> {
    vec![
        vec!["plan", "examples/small.csv"],
        vec!["plan", "examples/small_cnn.json", "-f", "json"],
        vec!["bound", "examples/small.csv"],
        vec!["inspect", "examples/small_cnn.json"],
        vec!["planners"],
        vec!["bench", "examples/small.csv", "--planners", "naive"],
        vec!["swap", "crates/memplan-cli/tests/data/tiny.graph.txt"],
        vec!["pool", "train", "examples/pool_trace.csv"],
    ]
}

/// Standard output on a full disk (`/dev/full`): every printing subcommand ends with a
/// clear error naming standard output (exit 2), never a panic.
#[test]
fn a_full_standard_output_is_a_clear_error_for_every_subcommand() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        eprintln!("skipped: no /dev/full here");
        return;
    };
    for args in printing_commands() {
        let out = Command::new(env!("CARGO_BIN_EXE_memplan"))
            .args(&args)
            .current_dir(root())
            .stdout(full.try_clone().unwrap())
            .output()
            .unwrap();
        no_panic(&out, &args.join(" "));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("cannot write to standard output"),
            "{args:?}: {err}"
        );
    }
}

/// Standard output closed before the result is written (`memplan … | head` after head
/// exits): every printing subcommand exits quietly, without a panic or a message.
#[test]
fn a_closed_pipe_on_standard_output_ends_quietly_for_every_subcommand() {
    for args in printing_commands() {
        let mut child = Command::new(env!("CARGO_BIN_EXE_memplan"))
            .args(&args)
            .current_dir(root())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take()); // the reader goes away before anything is read
        let out = child.wait_with_output().unwrap();
        no_panic(&out, &args.join(" "));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(err.is_empty(), "{args:?}: {err}");
    }
}

/// An error reported to a full or closed standard error still exits 2, not 101.
#[test]
fn an_error_on_a_full_or_closed_standard_error_exits_2() {
    if let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") {
        let out = Command::new(env!("CARGO_BIN_EXE_memplan"))
            .args(["plan", "no-such-file.csv"])
            .stderr(full)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_memplan"))
        .args(["plan", "no-such-file.csv"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    assert_eq!(child.wait().unwrap().code(), Some(2));
}

/// Escape sequences in a file's contents or name (a CSV header, a path) are echoed
/// escaped in error messages, never raw to the terminal.
#[test]
fn control_characters_in_error_messages_are_escaped() {
    let header = scratch(
        "escape-header.csv",
        b"id,lo\x1b[2Jwer,upper,size\n1,0,1,8\n",
    );
    let named = scratch(
        "na\x1b]0;title\x07me.csv",
        b"id,lower,upper,size\nx,0,1,-8\n",
    );
    for path in [&header, &named] {
        let out = memplan(&["plan", path.to_str().unwrap()]);
        no_panic(&out, "plan");
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains('\x1b') && !err.contains('\x07'), "{err:?}");
        assert!(err.contains("\\u{1b}"), "{err:?}");
    }
}

/// `/dev/zero` named as a replay trace (`.bin`) is refused at its first record (a free of
/// an id never allocated) instead of being read to the 4 GiB cap (it reached 4.2 GB of
/// memory, and a 3 GB sparse file 7.9 GB).
#[test]
fn an_endless_replay_trace_fails_at_its_first_record() {
    if !std::path::Path::new("/dev/zero").exists() {
        eprintln!("skipped: no /dev/zero here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("zero.bin");
    std::os::unix::fs::symlink("/dev/zero", &trace).unwrap();
    let out = memplan(&["pool", "train", trace.to_str().unwrap()]);
    no_panic(&out, "pool train");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("record 0: a free of id 0"), "{err}");
}

/// `check` streams a plan JSON: memplan's own plan of a problem under the text cap is
/// read even when the plan itself is larger than that cap (at 10^7 buffers a plan JSON is
/// about 3 GB against the 1 GiB cap), up to 16 times the cap, past which it is refused
/// with the bound named.
#[test]
fn check_streams_a_plan_json_larger_than_the_text_cap() {
    let mut csv = String::from("id,lower,upper,size\n");
    for i in 0..300 {
        csv.push_str(&format!("b{i},{},{},{}\n", i % 50, i % 50 + 3, 16 + i % 7));
    }
    let problem = scratch("stream_problem.csv", csv.as_bytes());
    let plan = problem.with_extension("plan.json");
    let out = memplan(&[
        "plan",
        problem.to_str().unwrap(),
        "-f",
        "json",
        "-o",
        plan.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan_bytes = std::fs::metadata(&plan).unwrap().len();
    let cap = 16_384u64;
    assert!(
        (csv.len() as u64) < cap && plan_bytes > cap && plan_bytes < 16 * cap,
        "{} {plan_bytes}",
        csv.len()
    );
    let cap_arg = cap.to_string();
    let args = |cap: &str| {
        memplan(&[
            "--max-input-bytes",
            cap,
            "check",
            problem.to_str().unwrap(),
            plan.to_str().unwrap(),
        ])
    };
    let out = args(&cap_arg);
    no_panic(&out, "check");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("valid"));
    // Past 16 times the cap the stream stops, naming the bound.
    let small = (plan_bytes / 16 - 1).max(csv.len() as u64 + 1).to_string();
    let out = args(&small);
    no_panic(&out, "check");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("the most memplan streams"), "{err}");
}

/// The hostile-input suite's finds (scripts/hostile_run.py): `/dev/zero` named `.tflite`
/// was read up to the 2 GiB cap (2 GB of RSS) before the identifier was looked at; a
/// sparse 10 GB file of any kind was read up to the cap before its size was; `/dev/zero`
/// or a 10 GB file on standard input was read up to the cap. Each now fails at once.
#[test]
fn an_endless_or_huge_input_fails_before_it_is_read() {
    if !std::path::Path::new("/dev/zero").exists() {
        eprintln!("skipped: no /dev/zero here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let zero = dir.path().join("zero.tflite");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let mut cases: Vec<(Vec<String>, &str)> = Vec::new();
    let zero = zero.to_str().unwrap().to_string();
    for command in ["plan", "bound", "inspect", "check"] {
        cases.push((vec![command.into(), zero.clone()], "not \"TFL3\""));
    }
    // Sparse: 10 GB that cost no disk.
    for name in ["sparse.tflite", "sparse.onnx", "sparse.csv", "sparse.json"] {
        let path = dir.path().join(name);
        std::fs::File::create(&path)
            .unwrap()
            .set_len(10 << 30)
            .unwrap();
        cases.push((
            vec!["bound".into(), path.to_str().unwrap().into()],
            "is larger than",
        ));
    }
    for (args, expected) in &cases {
        let out = memplan(&args.iter().map(String::as_str).collect::<Vec<_>>());
        no_panic(&out, &args[0]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        // (A sparse CSV, JSON or ONNX file read first failed on its NUL bytes.)
        assert!(err.contains(expected), "{args:?}: {err}");
    }
    let sparse = dir.path().join("sparse.csv");
    for (stdin, expected) in [
        (std::fs::File::open("/dev/zero").unwrap(), "8 NUL bytes"),
        (std::fs::File::open(&sparse).unwrap(), "is larger than"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_memplan"))
            .args(["bound", "-"])
            .stdin(stdin)
            .output()
            .unwrap();
        no_panic(&out, "bound -");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(expected), "{err}");
    }
}

/// The hostile-input suite's finds: an empty pool trace and an inconsistent pool plan were
/// refused without naming the file ("the trace has no events to train on", "invalid plan:
/// total_bytes is …" from the replay child).
#[test]
fn empty_traces_and_invalid_pool_plans_name_their_file() {
    let trace = scratch("empty_trace.csv", b"seq,iter,op,size,id,align\n");
    for command in ["train", "sweep"] {
        let out = memplan(&["pool", command, trace.to_str().unwrap()]);
        no_panic(&out, command);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {err}");
        assert!(
            err.contains("empty_trace.csv") && err.contains("no events"),
            "{command}: {err}"
        );
    }
    let good = root().join("fuzz/seeds/pool_plan/pool_trace.json");
    let text = std::fs::read_to_string(&good).unwrap();
    let broken = scratch(
        "broken_pool_plan.json",
        text.replace("\"total_bytes\": 141312", "\"total_bytes\": 7")
            .as_bytes(),
    );
    let trace = root().join("examples/pool_trace.csv");
    let out = memplan(&[
        "pool",
        "replay",
        trace.to_str().unwrap(),
        "-a",
        "pool",
        "--plan",
        broken.to_str().unwrap(),
    ]);
    no_panic(&out, "replay");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("broken_pool_plan.json") && err.contains("total_bytes is 7"),
        "{err}"
    );
}
