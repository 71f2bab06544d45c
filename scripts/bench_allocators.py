#!/usr/bin/env python3
"""Compare malloc implementations under a real PyTorch CPU training loop.

Runs ``train_step.py`` (beside this file) once per (scenario, model, allocator),
each in its own process with the same command line; only the environment
differs:

=================  ==========================================================
glibc              the system allocator, untouched
glibc-tuned        ``GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:
                   glibc.malloc.trim_threshold=4294967296``
tcmalloc           ``LD_PRELOAD`` of gperftools' tcmalloc (Debian
                   ``libtcmalloc-minimal4``; ``--tcmalloc PATH`` overrides)
jemalloc           ``LD_PRELOAD`` of Debian ``libjemalloc2`` (``--jemalloc``)
mimalloc           ``LD_PRELOAD`` of Debian ``libmimalloc2.0`` (``--mimalloc``)
memplan            ``LD_PRELOAD`` of ``--memplan-lib`` (default
                   ``target/release/libmemplan_preload.so`` in the repo) plus
                   any ``--memplan-env KEY=VALUE``; skipped, with a line
                   saying so, when the file does not exist
memplan-size-      the same library with ``MEMPLAN_POOL_PLAN=size-classes``:
classes            the method's size classes as stated instead of an offset
                   plan
=================  ==========================================================

For each run it reports the median minor page faults per steady iteration
(iterations after ``--warmup``, default 5), the peak RSS (``ru_maxrss``), the
median step time, whether the loss sequence is bit-identical to the plain
glibc run of the same scenario and model, and faults / step time / peak RSS
relative to that glibc run. Each preloaded library is checked to be mapped
in the child (ld.so only warns and carries on when a preload fails).

Scenarios: ``steady`` (batch ``--batch`` throughout) and, with
``--batch-change``, ``batch-change`` (batch 8 -> 12 from iteration 12: see
``--change-at``/``--batch-after``).

Install the third-party allocators on Debian/Ubuntu with::

    apt-get install -y libtcmalloc-minimal4 libjemalloc2 libmimalloc2.0

Example::

    python scripts/bench_allocators.py --iters 25 --batch-change \\
        --json /tmp/allocbench/results.json

Step times are wall-clock on whatever else the machine is doing; use
``--repeats N`` to run each configuration N times (medians over the pooled
steady iterations, max of the peaks) when the machine is noisy.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TRAIN_STEP = os.path.join(HERE, "train_step.py")

GLIBC_TUNED = ("glibc.malloc.mmap_threshold=33554432:"
               "glibc.malloc.trim_threshold=4294967296")

LIB_DIRS = (
    "/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu", "/lib/aarch64-linux-gnu",
    "/usr/lib64", "/usr/lib", "/lib64", "/lib", "/usr/local/lib",
)
# Preferred file names first; the unversioned .so (from -dev packages) last.
LIB_NAMES = {
    "tcmalloc": ("libtcmalloc_minimal.so.4", "libtcmalloc.so.4",
                 "libtcmalloc_minimal.so", "libtcmalloc.so"),
    "jemalloc": ("libjemalloc.so.2", "libjemalloc.so"),
    "mimalloc": ("libmimalloc.so.2", "libmimalloc.so.2.0", "libmimalloc.so"),
}
APT_PACKAGES = {"tcmalloc": "libtcmalloc-minimal4", "jemalloc": "libjemalloc2",
                "mimalloc": "libmimalloc2.0"}
ALL_ALLOCATORS = ("glibc", "glibc-tuned", "tcmalloc", "jemalloc", "mimalloc",
                  "memplan", "memplan-size-classes")
# Variables that would change the allocator or its tuning behind our back.
SCRUB_ENV = ("LD_PRELOAD", "GLIBC_TUNABLES", "MALLOC_ARENA_MAX",
             "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
             "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_", "MALLOC_CONF",
             "TCMALLOC_RELEASE_RATE", "MIMALLOC_OPTIONS")


def find_lib(kind):
    for name in LIB_NAMES[kind]:
        for d in LIB_DIRS:
            p = os.path.join(d, name)
            if os.path.isfile(p):
                return p
    return None


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Compare malloc implementations on a PyTorch CPU training loop.",
        epilog="See the module docstring (or README-bench-allocators.md) for details.")
    p.add_argument("--models", default="resnet18,transformer",
                   help="comma-separated: resnet18, transformer (default both)")
    p.add_argument("--allocators", default=",".join(ALL_ALLOCATORS),
                   help="comma-separated subset of %s" % ", ".join(ALL_ALLOCATORS))
    p.add_argument("--iters", type=int, default=25)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, default=5,
                   help="iterations excluded from the steady medians (default 5)")
    p.add_argument("--repeats", type=int, default=1,
                   help="processes per configuration (default 1)")
    p.add_argument("--batch-change", action="store_true",
                   help="also run the scenario where the batch grows mid-run")
    p.add_argument("--change-at", type=int, default=12,
                   help="iteration where the batch changes (default 12)")
    p.add_argument("--batch-after", type=int, default=12,
                   help="batch size after the change (default 12)")
    p.add_argument("--tcmalloc", metavar="PATH", help="tcmalloc .so (default: search)")
    p.add_argument("--jemalloc", metavar="PATH", help="jemalloc .so (default: search)")
    p.add_argument("--mimalloc", metavar="PATH", help="mimalloc .so (default: search)")
    p.add_argument("--memplan-lib", metavar="PATH",
                   default=os.path.join("target", "release", "libmemplan_preload.so"),
                   help="memplan preload library; relative paths are taken from the "
                        "repository root (default target/release/libmemplan_preload.so)")
    p.add_argument("--memplan-env", metavar="KEY=VALUE", action="append", default=[],
                   help="extra environment for the memplan run (repeatable)")
    p.add_argument("--python", default=sys.executable,
                   help="interpreter for train_step.py (default: this one)")
    p.add_argument("--timeout", type=float, default=1800,
                   help="seconds per training process (default 1800)")
    p.add_argument("--json", metavar="PATH", help="write the raw numbers here")
    p.add_argument("--keep-logs", metavar="DIR",
                   help="write each child's stdout/stderr into DIR")
    a = p.parse_args(argv)
    a.models = [m for m in a.models.split(",") if m]
    for m in a.models:
        if m not in ("resnet18", "transformer"):
            p.error("unknown model %r" % m)
    a.allocators = [x for x in a.allocators.split(",") if x]
    for x in a.allocators:
        if x not in ALL_ALLOCATORS:
            p.error("unknown allocator %r" % x)
    if "glibc" not in a.allocators:
        a.allocators.insert(0, "glibc")  # the reference for ratios and losses
    for kv in a.memplan_env:
        if "=" not in kv or kv.startswith("="):
            p.error("--memplan-env wants KEY=VALUE, got %r" % kv)
    if a.warmup >= a.iters:
        p.error("--warmup (%d) must be below --iters (%d)" % (a.warmup, a.iters))
    return a


def allocator_configs(args):
    """[(name, extra_env, preload_path_or_None, skip_reason_or_None)]"""
    out = []
    for name in args.allocators:
        if name == "glibc":
            out.append((name, {}, None, None))
        elif name == "glibc-tuned":
            out.append((name, {"GLIBC_TUNABLES": GLIBC_TUNED}, None, None))
        elif name in LIB_NAMES:
            path = getattr(args, name) or find_lib(name)
            if path is None:
                out.append((name, {}, None,
                            "no %s library found in %s; install the Debian package %s "
                            "or pass --%s PATH" % (name, ", ".join(LIB_DIRS[:4]),
                                                   APT_PACKAGES[name], name)))
            elif not os.path.isfile(path):
                out.append((name, {}, None, "%s does not exist" % path))
            else:
                path = os.path.abspath(path)
                out.append((name, {"LD_PRELOAD": path}, path, None))
        elif name in ("memplan", "memplan-size-classes"):
            path = args.memplan_lib
            if not os.path.isabs(path):
                path = os.path.join(REPO, path)
            if not os.path.isfile(path):
                out.append((name, {}, None,
                            "%s does not exist (build memplan's preload library, or "
                            "pass --memplan-lib PATH)" % path))
            else:
                env = {"LD_PRELOAD": path}
                if name == "memplan-size-classes":
                    env["MEMPLAN_POOL_PLAN"] = "size-classes"
                for kv in args.memplan_env:
                    k, v = kv.split("=", 1)
                    env[k] = v
                out.append((name, env, path, None))
    return out


def scenarios(args):
    s = [("steady", [])]
    if args.batch_change:
        s.append(("batch-change", ["--batch-change-at", str(args.change_at),
                                   "--batch-after", str(args.batch_after)]))
    return s


def run_one(args, model, scen_name, scen_args, alloc, extra_env, preload, rep):
    cmd = [args.python, TRAIN_STEP, "--model", model, "--batch", str(args.batch),
           "--iters", str(args.iters), "--threads", str(args.threads)] + scen_args
    env = {k: v for k, v in os.environ.items() if k not in SCRUB_ENV}
    env.update(extra_env)
    t0 = time.time()
    try:
        cp = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, timeout=args.timeout)
        rc, stdout, stderr = cp.returncode, cp.stdout, cp.stderr
    except subprocess.TimeoutExpired as e:
        rc = "timeout"
        stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        stderr = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
    wall = time.time() - t0
    if args.keep_logs:
        os.makedirs(args.keep_logs, exist_ok=True)
        base = os.path.join(args.keep_logs, "%s.%s.%s.%d" % (scen_name, model, alloc, rep))
        with open(base + ".out", "w") as f:
            f.write(stdout)
        with open(base + ".err", "w") as f:
            f.write(stderr)

    iters, final, bad_lines = [], None, 0
    for line in stdout.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            bad_lines += 1
            continue
        if "iter" in rec:
            iters.append(rec)
        elif "peak_rss_kb" in rec:
            final = rec
    res = {"scenario": scen_name, "model": model, "allocator": alloc, "repeat": rep,
           "command": cmd, "env": extra_env, "rc": rc, "wall_s": wall,
           "iters": iters, "final": final, "error": None}
    err_tail = " | ".join(stderr.strip().splitlines()[-3:])
    if isinstance(rc, int) and rc < 0:
        try:
            sig = signal.Signals(-rc).name
        except ValueError:
            sig = "signal %d" % -rc
        res["error"] = "killed by %s after %d/%d iterations%s" % (
            sig, len(iters), args.iters, (": " + err_tail) if err_tail else "")
    elif rc != 0:
        res["error"] = "exit %s after %d/%d iterations%s" % (
            rc, len(iters), args.iters, (": " + err_tail) if err_tail else "")
    elif final is None or len(iters) != args.iters:
        res["error"] = "incomplete output (%d/%d iterations)%s" % (
            len(iters), args.iters, (": " + err_tail) if err_tail else "")
    elif preload is not None and not final.get("preload_mapped", {}).get(preload):
        res["error"] = "%s was not mapped in the child (LD_PRELOAD ignored?)%s" % (
            preload, (": " + err_tail) if err_tail else "")
    return res


def summarise(runs, warmup):
    """Pool the repeats of one configuration into one row of numbers."""
    ok = [r for r in runs if r["error"] is None]
    row = {"runs": len(runs), "ok_runs": len(ok),
           "errors": [r["error"] for r in runs if r["error"]]}
    if not ok:
        return row
    steady = [it for r in ok for it in r["iters"] if it["iter"] >= warmup]
    row["faults_per_iter"] = statistics.median(it["minflt"] for it in steady)
    row["step_ms"] = 1000.0 * statistics.median(it["seconds"] for it in steady)
    row["min_step_ms"] = 1000.0 * min(it["seconds"] for it in steady)
    if all("nivcsw" in it for it in steady):
        row["nivcsw_per_iter"] = statistics.median(it["nivcsw"] for it in steady)
    if all("cpu_seconds" in it for it in steady):
        row["cpu_ms"] = 1000.0 * statistics.median(it["cpu_seconds"] for it in steady)
    row["peak_rss_mib"] = max(r["final"]["peak_rss_kb"] for r in ok) / 1024.0
    if all("rss_start_kb" in r["final"] for r in ok):
        row["train_peak_mib"] = max(r["final"]["peak_rss_kb"] - r["final"]["rss_start_kb"]
                                    for r in ok) / 1024.0
    row["first_iter_faults"] = statistics.median(r["iters"][0]["minflt"] for r in ok)
    row["final_rss_mib"] = statistics.median(r["iters"][-1]["rss_kb"] for r in ok) / 1024.0
    seqs = {tuple(repr(it["loss"]) for it in r["iters"]) for r in ok}
    row["losses_consistent_across_repeats"] = len(seqs) == 1
    row["losses"] = [it["loss"] for it in ok[0]["iters"]]
    row["memplan_pool_step"] = any(r["final"].get("memplan_pool") for r in ok)
    for key in ("memplan_pool_active", "memplan_pool_summary"):
        vals = [r["final"][key] for r in ok if key in r["final"]]
        if vals:
            row[key] = vals[-1]
    row["malloc_libs"] = sorted({l for r in ok for l in r["final"].get("malloc_libs", [])})
    return row


def fmt_ratio(x, ref):
    if x is None or ref is None:
        return "n/a"
    if ref == 0:
        return "n/a (glibc 0)" if x else "1.00"
    return "%.2f" % (x / ref)


def main(argv=None):
    args = parse_args(argv)
    configs = allocator_configs(args)
    notes = []
    for name, _, path, skip in configs:
        if skip:
            line = "NOT MEASURED: %s: %s" % (name, skip)
            notes.append(line)
            print(line, flush=True)
        elif path:
            print("%s: LD_PRELOAD=%s" % (name, path), flush=True)

    results = {"config": {
        "python": args.python, "train_step": TRAIN_STEP, "iters": args.iters,
        "warmup": args.warmup, "batch": args.batch, "threads": args.threads,
        "repeats": args.repeats, "glibc_tunables": GLIBC_TUNED,
        "change_at": args.change_at if args.batch_change else None,
        "batch_after": args.batch_after if args.batch_change else None,
        "allocators": {n: {"env": e, "skipped": s} for n, e, _, s in configs}},
        "notes": notes, "rows": [], "runs": []}

    rows = []
    for scen_name, scen_args in scenarios(args):
        for model in args.models:
            # Repeats go round-robin over the allocators so that a burst of load from
            # elsewhere on the machine does not land on one allocator only.
            runs = {name: [] for name, _, _, skip in configs if not skip}
            for rep in range(args.repeats):
                for name, extra_env, path, skip in configs:
                    if skip:
                        continue
                    print("running %s / %s / %s%s ..." % (
                        scen_name, model, name,
                        " (repeat %d)" % (rep + 1) if args.repeats > 1 else ""),
                        end="", flush=True)
                    r = run_one(args, model, scen_name, scen_args, name, extra_env, path, rep)
                    print(" %.0fs%s" % (r["wall_s"],
                                        (" FAILED: " + r["error"]) if r["error"] else ""),
                          flush=True)
                    runs[name].append(r)
                    results["runs"].append(r)
            ref = None
            for name, extra_env, path, skip in configs:
                if skip:
                    rows.append({"scenario": scen_name, "model": model, "allocator": name,
                                 "skipped": skip})
                    continue
                row = summarise(runs[name], args.warmup)
                row.update({"scenario": scen_name, "model": model, "allocator": name})
                if name == "glibc":
                    ref = row if "faults_per_iter" in row else None
                if "faults_per_iter" in row:
                    if ref is not None:
                        row["faults_ratio"] = (row["faults_per_iter"] / ref["faults_per_iter"]
                                               if ref["faults_per_iter"] else None)
                        row["step_ratio"] = row["step_ms"] / ref["step_ms"]
                        row["peak_rss_ratio"] = row["peak_rss_mib"] / ref["peak_rss_mib"]
                        if ref.get("train_peak_mib") and "train_peak_mib" in row:
                            row["growth_ratio"] = row["train_peak_mib"] / ref["train_peak_mib"]
                        row["loss_identical_to_glibc"] = (
                            [repr(x) for x in row["losses"]] == [repr(x) for x in ref["losses"]])
                    else:
                        row["loss_identical_to_glibc"] = None
                rows.append(row)
    results["rows"] = rows

    print()
    print(render_table(rows, args, notes))
    if args.json:
        d = os.path.dirname(os.path.abspath(args.json))
        os.makedirs(d, exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
        print("raw numbers: %s" % args.json)
    failed = [r for r in rows if r.get("errors")]
    return 1 if failed else 0


def render_table(rows, args, notes):
    out = []
    out.append("Steady = iterations %d..%d (after a warm-up of %d); medians per iteration; "
               "ratios are to plain glibc in the same scenario and model; %d thread(s), "
               "batch %d%s." % (args.warmup, args.iters - 1, args.warmup, args.threads,
                                args.batch,
                                ("; batch-change: batch %d from iteration %d"
                                 % (args.batch_after, args.change_at))
                                if args.batch_change else ""))
    out.append("")
    out.append("| scenario | model | allocator | faults/iter | x glibc | step ms | x glibc "
               "| min ms | CPU ms | preempt | peak RSS MiB | x glibc | growth MiB | x glibc | loss = glibc |")
    out.append("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|")
    for r in rows:
        head = "| %s | %s | %s " % (r["scenario"], r["model"], r["allocator"])
        if "skipped" in r:
            out.append(head + "| not measured | | | | | | | | | | | | |")
            continue
        if "faults_per_iter" not in r:
            out.append(head + "| FAILED: %s | | | | | | | | | | | | |"
                       % r["errors"][0].replace("|", "/")[:200])
            continue
        ident = r.get("loss_identical_to_glibc")
        ident = "n/a" if ident is None else ("yes" if ident else "**NO**")
        if not r.get("losses_consistent_across_repeats", True):
            ident += " (repeats differ)"
        out.append(head + "| %.0f | %s | %.1f | %s | %.1f | %s | %s | %.1f | %s | %s | %s | %s |" % (
            r["faults_per_iter"],
            fmt_ratio(r["faults_per_iter"], _ref(rows, r, "faults_per_iter")),
            r["step_ms"], fmt_ratio(r["step_ms"], _ref(rows, r, "step_ms")),
            r["min_step_ms"],
            ("%.1f" % r["cpu_ms"]) if "cpu_ms" in r else "n/a",
            ("%.0f" % r["nivcsw_per_iter"]) if "nivcsw_per_iter" in r else "n/a",
            r["peak_rss_mib"], fmt_ratio(r["peak_rss_mib"], _ref(rows, r, "peak_rss_mib")),
            ("%.1f" % r["train_peak_mib"]) if "train_peak_mib" in r else "n/a",
            fmt_ratio(r.get("train_peak_mib"), _ref(rows, r, "train_peak_mib")),
            ident))
        if r.get("errors"):
            out.append("|  |  | (%d of %d runs failed: %s) | | | | | | | | | | | | |" % (
                len(r["errors"]), r["runs"], r["errors"][0].replace("|", "/")[:200]))
    for n in notes:
        out.append("")
        out.append(n)
    pool = {r["allocator"] for r in rows if r.get("memplan_pool_step")}
    out.append("")
    out.append("min ms = fastest steady iteration. CPU ms = median user+system CPU time "
               "of the whole process per steady iteration. preempt = median involuntary "
               "context switches per steady iteration: when it is high, other load took "
               "the CPU and the times say little about the allocator (OpenMP threads "
               "spin while a sibling is descheduled, so CPU ms grows too). Peak RSS = ru_maxrss of the whole process, which includes "
               "several hundred MiB for importing torch; growth = peak RSS minus VmRSS "
               "just before the first iteration (model built), i.e. what training added.")
    for r in rows:
        if "memplan_pool_active" in r or r.get("memplan_pool_summary"):
            if r["allocator"].startswith("memplan") or r.get("memplan_pool_active"):
                out.append("")
                out.append("memplan pool, %s / %s: active=%s; %s" % (
                    r["scenario"], r["model"], r.get("memplan_pool_active"),
                    (r.get("memplan_pool_summary") or "").strip().replace("\n", "; ")))
    out.append("")
    out.append("memplan.pool.step() was %s." % (
        "called every iteration (module present)" if pool else
        "not called (module memplan.pool not importable)"))
    return "\n".join(out)


def _ref(rows, r, key):
    for x in rows:
        if (x["scenario"], x["model"], x["allocator"]) == (r["scenario"], r["model"], "glibc"):
            return x.get(key)
    return None


if __name__ == "__main__":
    sys.exit(main())
