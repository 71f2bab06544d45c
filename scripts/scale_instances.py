#!/usr/bin/env python3
"""Writes the scale instances of issue #18 as minimalloc CSVs (`id,lower,upper,size`,
upper exclusive). Python 3 standard library only; deterministic (fixed seeds).

    python3 scripts/scale_instances.py OUT_DIR [--sizes 100000,1000000] [--y1 PATH]

Instances (N = each of --sizes):

* `random-live200-N.csv`, `random-live20000-N.csv`: N buffers with random lifetimes, about
  200 (resp. 20,000) live at once. Lifetime lengths are uniform in [1, 199] steps (mean
  100), starts uniform in [0, H) with H = N * 100 / LIVE, so that N * 100 / H = LIVE
  buffers are live at a typical step. Sizes are log-uniform in [64 B, 16 MiB], rounded up
  to a multiple of 64.
* `y1x16.csv` (once, with --y1): idealloc's iopddl/Y_1.csv (62,185 buffers) copied 16
  times *one after another in time*: copy k's lifetimes are shifted by k * (the largest
  upper of Y_1), so copies never overlap in time and the optimal arena is Y_1's.
  994,960 buffers; ids renumbered 0..n-1 in file order.
"""

import argparse
import math
import os
import random

LOG_MIN = math.log(64)
LOG_MAX = math.log(16 << 20)


def size(rng):
    s = int(math.exp(rng.uniform(LOG_MIN, LOG_MAX)))
    return max(64, (s + 63) // 64 * 64)


def random_instance(path, n, live, seed):
    rng = random.Random(seed)
    horizon = max(1, n * 100 // live)
    with open(path, "w") as f:
        f.write("id,lower,upper,size\n")
        lines = []
        for i in range(n):
            start = rng.randrange(horizon)
            length = rng.randint(1, 199)
            lines.append(f"{i},{start},{start + length},{size(rng)}\n")
            if len(lines) >= 100_000:
                f.writelines(lines)
                lines.clear()
        f.writelines(lines)


def y1x16(path, y1, copies=16):
    rows = []
    with open(y1) as f:
        header = f.readline()
        assert header.strip() == "id,lower,upper,size", header
        for line in f:
            if line.strip():
                _, lower, upper, sz = line.strip().split(",")
                rows.append((int(lower), int(upper), int(sz)))
    span = max(u for _, u, _ in rows)
    with open(path, "w") as f:
        f.write("id,lower,upper,size\n")
        i = 0
        for k in range(copies):
            shift = k * span
            f.writelines(
                f"{i + j},{lo + shift},{up + shift},{sz}\n" for j, (lo, up, sz) in enumerate(rows)
            )
            i += len(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--sizes", default="100000,1000000",
                    help="comma-separated buffer counts (default 100000,1000000)")
    ap.add_argument("--live", default="200,20000", help="comma-separated live-at-once targets")
    ap.add_argument("--y1", default="/work/shared/benchmarks/idealloc/iopddl/Y_1.csv",
                    help="Y_1.csv to copy 16x ('' to skip)")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    for n in (int(s) for s in args.sizes.split(",") if s):
        for live in (int(s) for s in args.live.split(",") if s):
            path = os.path.join(args.out_dir, f"random-live{live}-{n}.csv")
            if not os.path.exists(path):
                random_instance(path, n, live, seed=n * 7919 + live)
                print("wrote", path)
    if args.y1:
        path = os.path.join(args.out_dir, "y1x16.csv")
        if not os.path.exists(path):
            y1x16(path, args.y1)
            print("wrote", path)


if __name__ == "__main__":
    main()
