#!/usr/bin/env python3
"""Planning time of `memplan swap` on long chains: time vs n and the growth exponent.

Runs the `swap_chain` example (crates/memplan-swap/examples/swap_chain.rs: a PipeDream
chain of N layers, 2N + 1 nodes, planned by the method with every improvement at a 5%
overhead over a 12 GB/s link) once per N and prints, per N, the wall-clock and CPU (user)
seconds, the peak resident memory, the simulations and the plan's peak reduction, then
the growth exponent log(t2 / t1) / log(n2 / n1) between consecutive N and a least-squares
fit over all of them, for wall and user time. On a shared machine the user time is the one to compare
(wall time includes waiting for the CPU).

    cargo build --release -p memplan-swap --example swap_chain
    python3 scripts/bench_swap_chain.py [--binary target/release/examples/swap_chain] \
        [--planner method] 1000 3000 10000 30000

No timed test uses this; doc/swap.md has the measured numbers.
"""
import argparse
import math
import os
import re
import subprocess
import sys
import tempfile
import time


def run(binary: str, n: int, planner: str):
    """Wall and user seconds, peak RSS (MiB), simulations and peak reduction of one run."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.monotonic()
        child = subprocess.Popen([binary, str(n), planner], stdout=out, stderr=err)
        # wait4: this child's own CPU time and peak resident set (ru_maxrss, KiB on Linux).
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"{binary} {n} {planner} failed ({code}): {stderr.strip()}")
    line = stdout.strip().splitlines()[-1]
    sims = re.search(r"(\d+) simulations", line)
    lower = re.search(r"\(([\d.]+)% lower\)", line)
    rss = usage.ru_maxrss / 1024
    return wall, usage.ru_utime, rss, sims.group(1) if sims else "-", lower.group(1) if lower else "-"


def exponent(xs, ys):
    """Least-squares slope of log(y) against log(x)."""
    lx = [math.log(x) for x in xs]
    ly = [math.log(max(y, 1e-6)) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    den = sum((a - mx) ** 2 for a in lx)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / den if den else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default="target/release/examples/swap_chain")
    parser.add_argument("--planner", default="method")
    parser.add_argument("layers", nargs="*", type=int, default=[1000, 3000, 10000])
    args = parser.parse_args()
    if not os.path.exists(args.binary):
        sys.exit(f"{args.binary} not found: cargo build --release -p memplan-swap --example swap_chain")
    rows = []
    print("| N (layers) | nodes | wall s | user s | max RSS MiB | simulations | peak lower | exponent (wall) | exponent (user) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in args.layers:
        wall, user, rss, sims, lower = run(args.binary, n, args.planner)
        if rows:
            pn, pw, pu = rows[-1]
            ew = f"{math.log(wall / pw) / math.log(n / pn):.2f}"
            eu = f"{math.log(max(user, 1e-6) / max(pu, 1e-6)) / math.log(n / pn):.2f}"
        else:
            ew = eu = "-"
        rows.append((n, wall, user))
        print(f"| {n} | {2 * n + 1} | {wall:.2f} | {user:.2f} | {rss:.0f} | {sims} | {lower}% | {ew} | {eu} |", flush=True)
    if len(rows) > 1:
        ns = [r[0] for r in rows]
        print(
            f"\nleast-squares exponent over N = {ns}: wall {exponent(ns, [r[1] for r in rows]):.2f}, "
            f"user {exponent(ns, [r[2] for r in rows]):.2f}"
        )


if __name__ == "__main__":
    main()
