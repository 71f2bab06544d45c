#!/usr/bin/env python3
"""Scale benchmark of issue #18: `memplan plan` (best-of, strip) and `memplan check` on
the instances of scripts/scale_instances.py, each under `/usr/bin/time -v`.

    cargo build --release -p memplan-cli
    python3 scripts/scale_instances.py /tmp/scale --sizes 100000,1000000
    python3 scripts/scale_bench.py /tmp/scale/*.csv [--planners best-of,strip]
        [--memplan target/release/memplan] [--no-check]

For every FILE and planner it runs what a user runs:

    memplan plan FILE --planner P --format csv --output PLAN.csv
    memplan check FILE PLAN.csv

(the plan is written to a file, so terminal printing is not measured; `plan` itself also
checks its plan before writing it). It prints one markdown row per run: buffers, planner,
wall and user CPU seconds, max RSS, arena / max-live bound; `check` rows come after their
plan. Then the growth exponent of each (instance family, planner): the log-log slope of
wall time (and of user time) between the smallest and the largest buffer count of the
family. The machine load (`uptime`) is printed before and after.
Python 3 standard library only.
"""

import argparse
import math
import os
import re
import signal
import subprocess
import sys
import tempfile


def timed(cmd, timeout=None):
    """Runs cmd under /usr/bin/time -v; returns (wall s, user s, max RSS KiB, stdout), or
    None when it ran past `timeout` seconds (then it is killed)."""
    # Its own process group, so that a timeout kills memplan too, not only `time`.
    proc = subprocess.Popen(["/usr/bin/time", "-v"] + cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{err[-2000:]}")

    def field(name):
        m = re.search(re.escape(name) + r": (.*)", err)
        return m.group(1).strip()

    wall = field("Elapsed (wall clock) time (h:mm:ss or m:ss)")
    secs = 0.0
    for part in wall.split(":"):
        secs = secs * 60 + float(part)
    read = re.search(r"timing: read ([0-9.]+) s", err)
    return (secs, float(field("User time (seconds)")), int(field("Maximum resident set size (kbytes)")),
            float(read.group(1)) if read else None)


def family(path):
    """`random-live200-1000000.csv` -> (`random-live200`, 1000000); others -> (stem, None)."""
    stem = os.path.basename(path).rsplit(".", 1)[0]
    m = re.match(r"(.*)-(\d+)$", stem)
    return (m.group(1), int(m.group(2))) if m else (stem, None)


def main():
    # `memplan plan` prints its phases' times (the read's goes in search rows).
    os.environ["MEMPLAN_TIMINGS"] = "1"
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--planners", default="best-of,strip",
                    help="comma-separated; `search@5` runs `--planner search --time-limit 5`")
    ap.add_argument("--timeout", type=float, default=None,
                    help="kill a plan run after this many seconds and print `> T`")
    ap.add_argument("--memplan", default="target/release/memplan")
    ap.add_argument("--no-check", action="store_true", help="skip `memplan check`")
    ap.add_argument("--check-only", action="store_true",
                    help="only plan with the first planner and check (the 10^7 check case)")
    args = ap.parse_args()
    print("load before:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print()
    print("| file | buffers | command | wall s | user s | max RSS MiB | arena / bound |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: |")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for path in args.files:
            with open(path) as f:
                n = sum(1 for _ in f) - 1
            bound_out = subprocess.run([args.memplan, "bound", path, "--format", "json"],
                                       capture_output=True, text=True, check=True).stdout
            bound = int(re.search(r'"(?:max_live_bytes|lower_bound|bound)[a-z_]*"\s*:\s*(\d+)', bound_out).group(1))
            planners = args.planners.split(",")[:1] if args.check_only else args.planners.split(",")
            for planner in planners:
                out = os.path.join(tmp, "plan.csv")
                name = os.path.basename(path)
                extra = []
                if "@" in planner:
                    base, limit = planner.split("@")
                    extra = ["--planner", base, "--time-limit", limit]
                else:
                    extra = ["--planner", planner]
                run = timed([args.memplan, "plan", path] + extra +
                            ["--format", "csv", "--output", out], args.timeout)
                if run is None:
                    print(f"| {name} | {n} | plan {planner} | > {args.timeout:.0f} | | | |", flush=True)
                    continue
                wall, user, rss, read = run
                if read is not None and "@" in planner:
                    planner = f"{planner} (read {read:.2f} s)"
                arena = 0
                with open(out) as f:
                    header = f.readline().strip().split(",")
                    o, s = header.index("offset"), header.index("size")
                    for line in f:
                        cols = line.split(",")
                        arena = max(arena, int(cols[o]) + int(cols[s]))
                print(f"| {name} | {n} | plan {planner} | {wall:.2f} | {user:.2f} | {rss / 1024:.0f} | {arena / bound:.4f} |", flush=True)
                results[(family(path)[0], planner.split(" ")[0], n)] = (wall, user)
                if not args.no_check:
                    cw, cu, crss, _ = timed([args.memplan, "check", path, out])
                    print(f"| {name} | {n} | check ({planner}'s plan) | {cw:.2f} | {cu:.2f} | {crss / 1024:.0f} | |", flush=True)
                    results[(family(path)[0], "check", n)] = (cw, cu)
    print()
    print("load after:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print()
    print("| instances | command | from n | to n | exponent (wall) | exponent (user) |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    keys = sorted({(fam, p) for fam, p, _ in results})
    for fam, p in keys:
        ns = sorted(n for f2, p2, n in results if (f2, p2) == (fam, p))
        if len(ns) < 2:
            continue
        (w0, u0), (w1, u1) = results[(fam, p, ns[0])], results[(fam, p, ns[-1])]
        span = math.log(ns[-1] / ns[0])
        ew = math.log(max(w1, 1e-3) / max(w0, 1e-3)) / span
        eu = math.log(max(u1, 1e-3) / max(u0, 1e-3)) / span
        print(f"| {fam} | {p} | {ns[0]} | {ns[-1]} | {ew:.2f} | {eu:.2f} |")


if __name__ == "__main__":
    main()
