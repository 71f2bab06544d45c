//! The preloadable pool in real processes: a `python3` started with
//! `LD_PRELOAD=libmemplan_preload.so` runs a repeating program of large allocations (from
//! several threads, and across a `fork`), checks every block's contents, and reads the
//! pool's counters through the exported `memplan_pool_summary`.

use std::path::PathBuf;
use std::process::Command;

/// `target/<profile>/libmemplan_preload.so`, next to this test's `deps` folder. Cargo
/// does not build a cdylib for its own integration tests, so the first test builds it,
/// with the cargo that runs the tests, in the same profile.
fn library() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().unwrap();
            let dir = exe.parent().unwrap().parent().unwrap();
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let mut build = Command::new(cargo);
            build
                .args(["build", "-q", "-p", "memplan-preload", "--manifest-path"])
                .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml"));
            if dir.file_name().is_some_and(|n| n == "release") {
                build.arg("--release");
            }
            let status = build.status().expect("cargo runs");
            assert!(status.success(), "building memplan-preload failed");
            let lib = dir.join("libmemplan_preload.so");
            assert!(lib.exists(), "{} was not built", lib.display());
            lib
        })
        .clone()
}

fn python(script: &str, env: &[(&str, &str)]) -> (String, String) {
    let mut cmd = Command::new("python3");
    cmd.arg("-c").arg(script).env("LD_PRELOAD", library());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "python failed:\n{stdout}\n{stderr}");
    (stdout, stderr)
}

/// A training-like loop: each iteration allocates blocks of the same sizes, fills them
/// with a pattern, checks the pattern, and frees them in reverse order.
const PROGRAM: &str = r#"
import ctypes, os, sys, threading
lib = ctypes.CDLL(None)
lib.memplan_pool_summary.restype = ctypes.c_size_t
def summary():
    buf = ctypes.create_string_buffer(1024)
    lib.memplan_pool_summary(buf, 1024)
    return buf.value.decode()
SIZES = [300_000, 1_200_000, 70_000, 2_000_000, 300_000, 650_000]
def iteration(seed):
    blocks = []
    for i, n in enumerate(SIZES):
        b = bytearray(n)
        b[0] = b[-1] = (seed + i) % 251
        b[n // 2] = (seed * 7 + i) % 251
        blocks.append(b)
    for i, b in enumerate(blocks):
        n = len(b)
        assert b[0] == b[-1] == (seed + i) % 251, "corrupted"
        assert b[n // 2] == (seed * 7 + i) % 251, "corrupted"
    del blocks
def run(count, base):
    for it in range(count):
        iteration(base + it)
"#;

/// The count of requests served from the arena, from the pool's summary line.
fn arena_hits(summary: &str) -> u64 {
    summary
        .split(" served from the arena")
        .next()
        .and_then(|s| s.rsplit(", ").next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no hit count in: {summary}"))
}

#[test]
fn a_repeating_program_is_served_from_the_arena() {
    let script = format!("{PROGRAM}\nrun(40, 0)\nprint(summary())\n");
    let (out, _) = python(&script, &[("MEMPLAN_POOL_THRESHOLD", "65536")]);
    let hits = arena_hits(&out);
    assert!(hits >= 20 * 6, "{out}");
    assert!(out.contains("1 plans"), "{out}");
}

#[test]
fn the_size_class_plan_serves_a_repeating_program_too() {
    let script = format!("{PROGRAM}\nrun(40, 0)\nprint(summary())\n");
    let (out, _) = python(&script, &[("MEMPLAN_POOL_PLAN", "size-classes:4096")]);
    let hits = arena_hits(&out);
    assert!(hits >= 20 * 6, "{out}");
}

#[test]
fn a_setting_it_does_not_understand_is_named_once_and_its_default_used() {
    let script = format!("{PROGRAM}\nrun(40, 0)\nprint(summary())\n");
    for (key, value) in [
        ("MEMPLAN_POOL_PLAN", "slabs"),
        ("MEMPLAN_POOL_UNPLANNED", "sometimes"),
        ("MEMPLAN_POOL_THRESHOLD", "abc"),
    ] {
        let (out, err) = python(&script, &[(key, value)]);
        assert!(arena_hits(&out) >= 20 * 6, "the pool is on: {out}");
        // Named once per process: `python3` may be a wrapper script whose processes
        // each load the library (`tests/stress.rs` checks one process's single line).
        assert!(
            err.contains(&format!("{key}=`{value}`")),
            "{key} named: {err}"
        );
        assert!(err.contains("using the default"), "{err}");
    }
}

#[test]
fn threads_and_fork_keep_blocks_intact() {
    let script = format!(
        "{PROGRAM}
run(20, 0)
threads = [threading.Thread(target=run, args=(30, 1000 * t)) for t in range(4)]
for t in threads: t.start()
for t in threads: t.join()
pid = os.fork()
if pid == 0:
    run(20, 7)
    os._exit(0)
run(20, 9)
_, status = os.waitpid(pid, 0)
assert status == 0, status
print(summary())
"
    );
    let (out, _) = python(&script, &[]);
    assert!(out.contains("served from the arena"), "{out}");
}

#[test]
fn switched_off_it_only_passes_requests_through() {
    let script = format!("{PROGRAM}\nrun(10, 0)\nprint(repr(summary()))\n");
    let (out, _) = python(&script, &[("MEMPLAN_POOL", "0")]);
    assert_eq!(out.trim(), "''");
}

#[test]
fn the_summary_at_exit_goes_to_stderr() {
    let script = format!("{PROGRAM}\nrun(10, 0)\n");
    let (_, err) = python(
        &script,
        &[("MEMPLAN_POOL_SUMMARY", "1"), ("MEMPLAN_POOL_LOG", "1")],
    );
    assert!(
        err.contains("memplan pool:") && err.contains("process minor faults"),
        "{err}"
    );
    assert!(err.contains("iteration found"), "{err}");
}
