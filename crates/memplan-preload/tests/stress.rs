//! The preloadable pool under C programs (compiled here with `cc`): `stress.c`, 8 threads
//! of malloc/calloc/realloc/memalign/posix_memalign/aligned_alloc/free with every block's
//! contents checked and `fork` from the threads, under every setting of the library, each
//! run with a watchdog (a run past its time is a hang and fails); `edges.c`, the
//! allocation functions at their size and alignment edges, whose output must be glibc's;
//! and each bad `MEMPLAN_POOL_*` value, named once on stderr.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `target/<profile>/libmemplan_preload.so`, built by the first test that needs it (as in
/// `tests/preload.rs`: cargo does not build a cdylib for its own integration tests).
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

/// Compiles `tests/<name>.c` into the test's target folder; `None` (with the reason
/// printed) when there is no C compiler.
fn compile(name: &str) -> Option<PathBuf> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/{name}.c"));
    let exe = std::env::current_exe().unwrap();
    let out = exe
        .parent()
        .unwrap()
        .join(format!("memplan-preload-{name}"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let result = Command::new(&cc)
        .args(["-O2", "-pthread", "-w", "-fno-builtin", "-o"])
        .arg(&out)
        .arg(&source)
        .output();
    match result {
        Err(e) => {
            println!("SKIPPED: no C compiler (`{cc}`: {e}); {name}.c not run");
            None
        }
        Ok(o) => {
            assert!(
                o.status.success(),
                "{cc} failed on {}:\n{}",
                source.display(),
                String::from_utf8_lossy(&o.stderr)
            );
            Some(out)
        }
    }
}

/// Runs `cmd`, killing it after `limit`: a run past its time fails the test as a hang.
fn run_watched(mut cmd: Command, limit: Duration, what: &str) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the program starts");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("waits").is_some() {
            return child.wait_with_output().expect("output");
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "HANG: {what} ran past {limit:?} and was killed\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A setting: its name, its environment and how many runs.
type Mode = (&'static str, &'static [(&'static str, &'static str)], u64);

/// Every setting of the library that changes what a request goes through.
const MODES: &[Mode] = &[
    ("default (unplanned: mmap)", &[], 3),
    ("unplanned: heap", &[("MEMPLAN_POOL_UNPLANNED", "heap")], 6),
    (
        "size classes",
        &[("MEMPLAN_POOL_PLAN", "size-classes:4096")],
        2,
    ),
    (
        "another planner, low threshold",
        &[
            ("MEMPLAN_POOL_PLANNER", "greedy-size-bestfit"),
            ("MEMPLAN_POOL_THRESHOLD", "4096"),
        ],
        2,
    ),
    (
        "summary and log",
        &[("MEMPLAN_POOL_SUMMARY", "1"), ("MEMPLAN_POOL_LOG", "1")],
        2,
    ),
    ("off", &[("MEMPLAN_POOL", "0")], 1),
];

#[test]
fn eight_threads_and_fork_keep_every_block_intact_and_never_hang() {
    let Some(stress) = compile("stress") else {
        return;
    };
    let lib = library();
    for &(mode, env, repetitions) in MODES {
        for rep in 0..repetitions {
            let seed = (rep + 1).to_string();
            let mut cmd = Command::new(&stress);
            // 8 threads, 1500 rounds each, 40 single-threaded iterations before and after,
            // a fork every 300 rounds of each thread.
            cmd.args(["8", "1500", "40", "300", &seed])
                .env("LD_PRELOAD", &lib);
            for (k, v) in env {
                cmd.env(k, v);
            }
            let what = format!("stress under {mode}, seed {seed}");
            let out = run_watched(cmd, Duration::from_secs(20), &what);
            let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
            assert!(
                out.status.success(),
                "{what} failed ({}):\n{stdout}\n{stderr}",
                out.status
            );
            assert!(
                stdout.contains("stress: all contents verified (8 threads")
                    && stdout.contains("40 forks"),
                "{what}:\n{stdout}\n{stderr}"
            );
        }
    }
}

#[test]
fn the_edges_of_every_allocation_function_are_glibcs() {
    let Some(edges) = compile("edges") else {
        return;
    };
    let glibc = run_watched(Command::new(&edges), Duration::from_secs(20), "edges");
    let mut cmd = Command::new(&edges);
    cmd.env("LD_PRELOAD", library());
    let ours = run_watched(cmd, Duration::from_secs(20), "edges, preloaded");
    assert!(glibc.status.success() && ours.status.success());
    let (expected, got) = (text(&glibc.stdout), text(&ours.stdout));
    for line in [
        "pvalloc(SIZE_MAX - 100)                  NULL errno=ENOMEM",
        "calloc(SIZE_MAX / 2, 3)                  NULL errno=ENOMEM",
        "memalign(24, 100)                        block aligned errno=0",
        "posix_memalign(24, 100) returns EINVAL, out untouched",
        "malloc(SIZE_MAX)                         NULL errno=ENOMEM",
        "realloc(p, SIZE_MAX) NULL errno=ENOMEM, p intact",
        "edges: done",
    ] {
        assert!(got.contains(line), "preloaded, no `{line}`:\n{got}");
    }
    assert_eq!(got, expected, "preloaded (left) against glibc (right)");
    assert_eq!(text(&ours.stderr), "");
}

#[test]
fn each_bad_setting_is_named_once_and_the_program_still_works() {
    let Some(edges) = compile("edges") else {
        return;
    };
    let glibc = text(&run_watched(Command::new(&edges), Duration::from_secs(20), "edges").stdout);
    for (var, value) in [
        ("MEMPLAN_POOL_THRESHOLD", "abc"),
        ("MEMPLAN_POOL_THRESHOLD", "-5"),
        ("MEMPLAN_POOL_THRESHOLD", "1e23"),
        ("MEMPLAN_POOL_PLANNER", "nonsense"),
        ("MEMPLAN_POOL_PLAN", "slabs"),
        ("MEMPLAN_POOL_UNPLANNED", "sometimes"),
        ("MEMPLAN_POOL_SUMMARY", "yes"),
        ("MEMPLAN_POOL_LOG", "2"),
        ("MEMPLAN_POOL", "maybe"),
    ] {
        let mut cmd = Command::new(&edges);
        cmd.env("LD_PRELOAD", library()).env(var, value);
        let out = run_watched(
            cmd,
            Duration::from_secs(20),
            &format!("edges, {var}={value}"),
        );
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "{var}={value}: {stderr}");
        assert_eq!(
            stdout, glibc,
            "{var}={value}: the program works as without the library"
        );
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(
            lines.len(),
            1,
            "{var}={value}: one line on stderr:\n{stderr}"
        );
        assert!(
            lines[0].contains(&format!("{var}=`{value}`")) && lines[0].contains("default"),
            "{var}={value}: {stderr}"
        );
    }
}
