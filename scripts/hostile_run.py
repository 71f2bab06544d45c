#!/usr/bin/env python3
"""Runs memplan on the hostile-input corpus (scripts/hostile_corpus.py): every subcommand
that reads a format, on every file of that format, and (with --python) the Python API's
file readers. Fails (exit 1, a table of the failures) on any panic (exit 101, 'panicked'
in stderr, a PanicException or "internal error" in Python), death by a signal (SIGABRT,
SIGSEGV, ...), timeout, peak RSS over the limit (100 MB for /dev/zero and the 10 GB sparse
file, 1 GB for anything else), a non-zero exit that says nothing, or a raw ESC byte in
stderr. Prints a summary line: cases, clear errors, ok, panics, aborts, timeouts.

    python3 scripts/hostile_run.py --memplan target/debug/memplan [--python VENV_PYTHON]
        [--corpus DIR] [--only SUBSTRING] [--jobs N] [--no-cli]

Stdlib only. See doc/testing.md ("The hostile-input suite").
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 20.0
BIG_RSS = 100 * 10**6
ANY_RSS = 10**9

SMALL_CSV = str(ROOT / "examples/small.csv")
SMALL_GRAPH = str(ROOT / "examples/small_cnn.json")
POOL_TRACE = str(ROOT / "examples/pool_trace.csv")
PROBLEM_FORMATS = ("minimalloc_csv", "memops_csv", "pool_trace_csv", "graph_json", "onnx", "tflite")


def cli_commands(fmt: str, f: str, out: str, plan_problem: str, seed_plan: str) -> list[tuple[list[str], bool]]:
    """(arguments, read from standard input) of every run of `fmt`'s file `f`."""
    runs: list[tuple[list[str], bool]] = []
    if fmt in PROBLEM_FORMATS:
        runs += [
            (["plan", f, "-p", "best-of", "-f", "json", "-o", f"{out}/plan.json", "--svg", f"{out}/plan.svg"], False),
            (["bound", f], False),
            (["inspect", f, "-f", "json"], False),
            (["check", f, seed_plan], False),
            (["report", f, "-p", "best-of", "-o", f"{out}/report.html"], False),
            (["bench", f, "-p", "best-of,naive"], False),
            (["bound", "-"], True),
        ]
    if fmt in ("graph_json", "onnx", "tflite"):
        runs += [(["plan", f, "-p", "npu", "-f", "json"], False),
                 (["inspect", f, "--operators"], False),
                 (["plan", f, "-p", "exclusive", "-f", "json"], False)]
    if fmt == "tflite":
        runs += [(["check", f], False),
                 (["plan", f, "-p", "best-of", "--write-offline-plan", f"{out}/offline.tflite"], False)]
    if fmt in ("onnx", "pipedream", "torch_trace"):
        runs += [(["swap", f, "-f", "json"], False),
                 (["swap", f, "--planner", "method", "--budget", "60%", "-f", "json",
                   "--write-json", f"{out}/step.json", "--profile-csv", f"{out}/profile.csv"], False)]
    if fmt in ("pool_trace_csv", "pool_trace_bin"):
        runs += [(["pool", "train", f, "-o", f"{out}/pool_plan.json", "-f", "json"], False),
                 (["pool", "sweep", f], False),
                 (["pool", "replay", f, "-a", "pool"], False),
                 (["pool", "replay", f, "-a", "system", "--touch"], False)]
    if fmt in ("plan_json", "solution_csv"):
        runs += [(["check", plan_problem, f], False),
                 (["report", plan_problem, "-p", "best-of", "--compare", f, "-o", f"{out}/report.html"], False)]
    if fmt == "plan_json":
        runs += [(["report", f, "-o", f"{out}/report.html"], False)]
    if fmt == "pool_plan_json":
        runs += [(["pool", "replay", POOL_TRACE, "-a", "pool", "--plan", f], False)]
    if fmt == "platform_json":
        runs += [(["inspect", SMALL_GRAPH, "--operators", "--platform", f], False),
                 (["plan", SMALL_GRAPH, "-p", "npu", "--platform", f, "-f", "json"], False),
                 (["check", SMALL_GRAPH, seed_plan, "--platform", f], False)]
    return runs


def run_one(argv: list[str], stdin_path: str | None, big: bool) -> dict:
    """Runs one child under the timeout; its exit, signal, peak RSS (of its whole tree, as
    wait4 reports it) and the start of its stderr."""
    with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as out:
        stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
        try:
            proc = subprocess.Popen(argv, stdin=stdin, stdout=out, stderr=err, start_new_session=True)
        finally:
            if stdin_path:
                stdin.close()
        began = time.monotonic()
        deadline = began + TIMEOUT_S
        timed_out = False
        delay = 0.002
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        proc.returncode = 0  # reaped here; keep Popen from waiting again
        try:  # a grandchild left behind (the replay's) dies with the group
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        err.seek(0)
        stderr = err.read(1 << 16)
        out.seek(0, os.SEEK_END)
        out_bytes = out.tell()
    return {
        "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        "timed_out": timed_out,
        "rss": usage.ru_maxrss * 1024,
        "stderr": stderr,
        "stdout_bytes": out_bytes,
        "big": big,
        "secs": time.monotonic() - began,
    }


def judge(r: dict) -> tuple[str, str]:
    """(outcome, why): ok, error (clear), or a failure: panic, abort, timeout, rss,
    silent, escape."""
    stderr = r["stderr"]
    limit = BIG_RSS if r["big"] else ANY_RSS
    if r["timed_out"]:
        return "timeout", f"still running after {TIMEOUT_S:.0f} s"
    if r["signal"] is not None:
        return "abort", f"killed by {signal.Signals(r['signal']).name}"
    if r["exit"] == 101 or b"panicked" in stderr:
        return "panic", first_line(stderr, b"panicked")
    if r["rss"] > limit:
        return "rss", f"peak RSS {r['rss'] / 1e6:.0f} MB > {limit / 1e6:.0f} MB"
    if b"\x1b" in stderr:
        return "escape", "a raw ESC byte in stderr"
    if r["exit"] != 0:
        silent = not stderr.strip() and (r["exit"] != 1 or r["stdout_bytes"] == 0)
        if silent:
            return "silent", f"exit {r['exit']} with nothing on stderr"
        return "error", ""
    return "ok", ""


def first_line(stderr: bytes, marker: bytes) -> str:
    for line in stderr.splitlines():
        if marker in line:
            return line.decode("utf-8", "replace")[:160]
    return stderr.decode("utf-8", "replace").strip().splitlines()[0][:160] if stderr.strip() else ""


# The Python half: a child interpreter reads the cases of a batch one by one and prints
# one JSON line per case; a crash or hang is pinned on the case it had started.
PY_CHILD = r"""
import json, sys
import memplan
PROBLEM = memplan.Problem.from_csv(open(sys.argv[2]).read(), "plan_problem.csv")
def text(path):
    with open(path, "rb") as f:
        return f.read(64 << 20).decode("utf-8")
CALLS = {
    "read_csv": lambda p: memplan.read_csv(p),
    "plan_file": lambda p: memplan.plan_file(p, "best-of"),
    "plan_file_npu": lambda p: memplan.plan_file(p, "npu"),
    "load_onnx": lambda p: memplan.load_onnx(p),
    "load_tflite": lambda p: memplan.load_tflite(p),
    "from_csv": lambda p: memplan.Problem.from_csv(text(p), p),
    "read_plan": lambda p: memplan.read_plan(text(p), PROBLEM, p),
    "swap_plan_trace": lambda p: memplan._memplan.swap_plan_trace(text(p), max_overhead=0.1, source=p),
}
for line in open(sys.argv[1]):
    case = json.loads(line)
    print(json.dumps({"start": case["id"]}), flush=True)
    try:
        CALLS[case["call"]](case["path"])
        outcome, why = "ok", ""
    except BaseException as error:
        name = type(error).__name__
        message = str(error)
        if name == "PanicException" or "internal error" in message or "panicked" in message:
            outcome, why = "panic", f"{name}: {message[:160]}"
        elif isinstance(error, (memplan.MemplanError, OSError, ValueError)):
            outcome, why = ("error", "") if message.strip() else ("silent", f"{name} without a message")
            if "\x1b" in message:
                outcome, why = "escape", "a raw ESC in the message"
        else:
            outcome, why = "unexpected", f"{name}: {message[:160]}"
    print(json.dumps({"done": case["id"], "outcome": outcome, "why": why}), flush=True)
"""


def python_calls(fmt: str) -> list[str]:
    calls = {
        "minimalloc_csv": ["read_csv", "plan_file", "from_csv"],
        "memops_csv": ["plan_file"],
        "pool_trace_csv": ["plan_file"],
        "graph_json": ["plan_file", "plan_file_npu"],
        "onnx": ["plan_file", "load_onnx"],
        "tflite": ["plan_file", "load_tflite"],
        "plan_json": ["read_plan"],
        "solution_csv": ["read_plan"],
        "torch_trace": ["swap_plan_trace"],
    }
    return calls.get(fmt, [])


def run_python(python: str, cases: list[dict], corpus: Path, jobs: int, made: list[Path]) -> list[dict]:
    """Runs the Python cases in batches (one per format and call), the big ones each in its
    own interpreter so that its peak RSS is its own."""
    tmp = Path(tempfile.mkdtemp(prefix="hostile-py-"))
    made.append(tmp)
    script = tmp / "child.py"
    script.write_text(PY_CHILD)
    batches: dict[str, list[dict]] = {}
    for case in cases:
        key = case["id"] if case["big"] else case["format"] + "/" + case["call"]
        batches.setdefault(key, []).append(case)

    def batch(items: list[dict]) -> list[dict]:
        results = []
        pending = list(items)
        while pending:
            listing = Path(tempfile.mktemp(dir=tmp, suffix=".jsonl"))
            listing.write_text("".join(json.dumps(c) + "\n" for c in pending))
            proc = subprocess.Popen([python, str(script), str(listing), str(corpus / "plan_problem.csv")],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
            done: dict[str, dict] = {}
            started = None
            deadline = time.monotonic() + TIMEOUT_S + 10  # the first case pays the import
            buffer = b""
            dead = None
            while True:
                ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
                if not ready:
                    os.killpg(proc.pid, signal.SIGKILL)
                    dead = "timeout"
                    break
                chunk = os.read(proc.stdout.fileno(), 1 << 16)
                if not chunk:
                    break
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    msg = json.loads(line)
                    if "start" in msg:
                        started = msg["start"]
                        deadline = time.monotonic() + TIMEOUT_S
                    else:
                        done[msg["done"]] = msg
                        started = None
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = 0
            stderr = proc.stderr.read(1 << 16)
            proc.stdout.close()
            proc.stderr.close()
            by_id = {c["id"]: c for c in pending}
            for cid, msg in done.items():
                results.append(dict(by_id[cid], outcome=msg["outcome"], why=msg["why"],
                                    rss=usage.ru_maxrss * 1024))
            if started is not None:
                if dead != "timeout":
                    dead = ("abort", f"interpreter died ({'signal ' + signal.Signals(os.WTERMSIG(status)).name if os.WIFSIGNALED(status) else 'exit ' + str(os.WEXITSTATUS(status))}): "
                            + first_line(stderr, b"panicked"))
                else:
                    dead = ("timeout", f"still running after {TIMEOUT_S:.0f} s")
                results.append(dict(by_id[started], outcome=dead[0], why=dead[1], rss=usage.ru_maxrss * 1024))
                done[started] = {}
            elif len(done) < len(pending):
                # Died between cases: pin it on the next one.
                nxt = next(c for c in pending if c["id"] not in done)
                results.append(dict(nxt, outcome="abort", why="interpreter died: " + first_line(stderr, b"Error"),
                                    rss=0))
                done[nxt["id"]] = {}
            pending = [c for c in pending if c["id"] not in done]
        for r in results:
            limit = BIG_RSS if r["big"] else ANY_RSS
            if r["outcome"] in ("ok", "error") and r["big"] and r["rss"] > limit:
                r["outcome"], r["why"] = "rss", f"peak RSS {r['rss'] / 1e6:.0f} MB > {limit / 1e6:.0f} MB"
        return results

    with ThreadPoolExecutor(jobs) as pool:
        out = [r for rs in pool.map(batch, batches.values()) for r in rs]
    return out


def main() -> int:
    made: list[Path] = []
    try:
        return suite(made)
    finally:
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)


def suite(made: list[Path]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memplan", default=str(ROOT / "target/debug/memplan"))
    parser.add_argument("--python", help="an interpreter with the memplan package: also test the Python API")
    parser.add_argument("--no-cli", action="store_true", help="the Python API only")
    parser.add_argument("--corpus", help="an existing corpus folder (default: generate one in a temporary folder)")
    parser.add_argument("--only", default="", help="run only the cases whose label contains this")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--slowest", type=int, default=0, help="also list the N slowest CLI cases")
    args = parser.parse_args()

    if args.corpus:
        corpus = Path(args.corpus)
    else:
        corpus = Path(tempfile.mkdtemp(prefix="hostile-corpus-"))
        made.append(corpus)
        subprocess.run([sys.executable, str(ROOT / "scripts/hostile_corpus.py"), str(corpus)], check=True)
    records = json.loads((corpus / "manifest.json").read_text())
    scratch = Path(tempfile.mkdtemp(prefix="hostile-out-"))
    made.append(scratch)
    seed_plan = scratch / "seed_plan.json"
    plan_problem = str(corpus / "plan_problem.csv")
    started = time.monotonic()

    results: list[dict] = []
    if not args.no_cli:
        if not Path(args.memplan).is_file():
            print(f"hostile_run: no memplan binary at {args.memplan} (build it: cargo build -p memplan-cli)",
                  file=sys.stderr)
            return 2
        subprocess.run([args.memplan, "plan", SMALL_CSV, "-p", "best-of", "-f", "json", "-o", str(seed_plan)],
                       check=True)
        jobs = []
        for rec in records:
            path = str(corpus / rec["path"])
            for n, (cmd, stdin) in enumerate(cli_commands(rec["format"], path, "", plan_problem, str(seed_plan))):
                label = f"{rec['format']}/{rec['case']}: memplan {' '.join(cmd[:2])}" + (" <stdin" if stdin else "")
                if args.only in label:
                    jobs.append((rec, n, cmd, stdin, label))

        def work(job):
            rec, n, cmd, stdin, label = job
            out = scratch / f"{rec['format']}-{rec['case']}-{n}"
            out.mkdir()
            path = str(corpus / rec["path"])
            cmd = cli_commands(rec["format"], path, str(out), plan_problem, str(seed_plan))[n][0]
            r = run_one([args.memplan, *cmd], path if stdin else None, rec["big"])
            outcome, why = judge(r)
            return {"label": label, "outcome": outcome, "why": why, "rss": r["rss"], "secs": r["secs"],
                    "argv": "memplan " + " ".join(cmd) + (f" < {path}" if stdin else "")}

        with ThreadPoolExecutor(args.jobs) as pool:
            results += list(pool.map(work, jobs))
    if args.python:
        cases = []
        for rec in records:
            for call in python_calls(rec["format"]):
                label = f"{rec['format']}/{rec['case']}: python {call}"
                if args.only not in label:
                    continue
                # The str-taking APIs read the file here first: /dev/zero would hang this
                # script's own read, not memplan.
                if rec["big"] and call in ("from_csv", "read_plan", "swap_plan_trace"):
                    continue
                cases.append({"id": label, "label": label, "call": call, "big": rec["big"],
                              "format": rec["format"], "path": str(corpus / rec["path"]),
                              "argv": f"memplan.{call}({corpus / rec['path']})"})
        results += run_python(args.python, cases, corpus, args.jobs, made)

    failures = [r for r in results if r["outcome"] not in ("ok", "error")]

    def count(*kinds: str) -> int:
        return sum(r["outcome"] in kinds for r in results)

    if failures:
        print(f"{'outcome':<10} {'case':<70} why")
        for r in sorted(failures, key=lambda r: r["label"]):
            print(f"{r['outcome']:<10} {r['label']:<70} {r['why']}")
            print(f"{'':<10} {r['argv'][:200]}")
    if args.slowest:
        for r in sorted((r for r in results if "secs" in r), key=lambda r: -r["secs"])[:args.slowest]:
            print(f"{r['secs']:6.2f} s {r['rss'] / 1e6:6.0f} MB  {r['label']}")
    big_rss = max((r["rss"] for r in results if "dev_zero" in r["label"] or "sparse" in r["label"]), default=0)
    print(f"hostile suite: {len(results)} cases, {count('error')} clear errors, {count('ok')} ok, "
          f"{count('panic')} panics, {count('abort')} aborts, {count('timeout')} timeouts, "
          f"{count('rss')} over the RSS limit, {count('silent', 'escape', 'unexpected')} other failures "
          f"(peak RSS of the /dev/zero and sparse cases {big_rss / 1e6:.0f} MB; {time.monotonic() - started:.0f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
