#!/usr/bin/env python3
"""Scale benchmark of the pool trainer: `memplan pool train` and `memplan pool sweep` (#45).

Writes pool traces (the CSV of doc/traces.md: iter,op,size,id) of two shapes for each n:

- `live`: n tensors of one size class (4096 B) allocated one after another, all live at
  once, then freed (one iteration): every tensor needs a block of its own;
- `staggered`: two identical iterations of n tensors of one class at the default interval
  (sizes 1..2048 B, several classes at the smaller sweep intervals), tensor i allocated
  at step i and freed a pseudo-random 1..n/5 steps later, so about n/10 are live at once,
  blocks are reused, and the tensors still live at the end of iteration 1 are freed in
  iteration 2 (wrap-around lifetimes).

and times each `--memplan` binary on each trace (one after the other per case, in one run,
so that builds compare on the same load): `pool train TRACE` (defaults: interval 2048,
allocation order, packed) and `pool sweep TRACE` (9 intervals x 3 orders), each also with
`--no-pack` (`train-nopack`, `sweep-nopack`: the trainer alone). Prints one
row per binary, shape, n and command (wall seconds; `>T` past `--timeout`), then per
binary, shape and command the growth exponent: the log-log slope of seconds against n
from the smallest to the largest n (a lower bound `>=` when the largest timed out).

    cargo build --release -p memplan-cli
    python3 scripts/bench_pool_train.py --memplan target/release/memplan \
        [--memplan OTHER_BUILD ...] [--n 1000,10000,100000] [--timeout 300] [--dir /tmp/pooltrain]

Python 3 standard library only.
"""

import argparse
import math
import os
import subprocess
import sys
import time


def write_live(path, n):
    with open(path, "w") as f:
        f.write("iter,op,size,id\n")
        for i in range(n):
            f.write(f"1,alloc,4096,{i}\n")
        for i in range(n):
            f.write(f"1,free,4096,{i}\n")


def write_staggered(path, n):
    span = max(1, n // 5)
    # A fixed linear congruential generator: the same trace on every run and machine.
    state = 12345

    def rand():
        nonlocal state
        state = (state * 1103515245 + 12345) % (1 << 31)
        return state

    shape = []
    for _ in range(n):
        size = 1 + rand() % 2048
        life = 1 + rand() % span
        shape.append((size, life))
    frees = {}
    with open(path, "w") as f:
        f.write("iter,op,size,id\n")
        iters = 2
        for step in range(iters * n):
            it = 1 + step // n
            size, life = shape[step % n]
            f.write(f"{it},alloc,{size},{step}\n")
            frees.setdefault(step + life, []).append((step, size))
            for tid, tsize in frees.pop(step, []):
                f.write(f"{it},free,{tsize},{tid}\n")
        for when in sorted(frees):
            for tid, tsize in frees[when]:
                f.write(f"{iters},free,{tsize},{tid}\n")


SHAPES = {"live": write_live, "staggered": write_staggered}
# `NAME-nopack`: the same with `--no-pack` (the trainer alone, without memplan's packing).
COMMANDS = ["train", "train-nopack", "sweep", "sweep-nopack"]


def run(binary, command, trace, timeout):
    verb, _, nopack = command.partition("-")
    argv = [binary, "pool", verb, trace] + (["--no-pack"] if nopack else [])
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=timeout,
            text=True,
        )
    except subprocess.TimeoutExpired:
        return None, "timeout"
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{binary} pool {command} {trace} failed:\n{proc.stderr}")
    return elapsed, proc.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memplan", action="append", help="memplan binary (repeatable)")
    parser.add_argument("--n", default="1000,10000,100000")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--commands", default=",".join(COMMANDS))
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--dir", default="/tmp/memplan-pool-train-bench")
    args = parser.parse_args()
    binaries = args.memplan or ["target/release/memplan"]
    ns = [int(x) for x in args.n.split(",")]
    shapes = args.shapes.split(",")
    commands = args.commands.split(",")
    os.makedirs(args.dir, exist_ok=True)

    times = {}
    # A binary that timed out at some n is not run at larger n of that shape and command.
    gave_up = set()
    print("| binary | shape | n | command | seconds | blocks (train) |")
    print("|---|---|---:|---|---:|---:|")
    for shape in shapes:
        for n in ns:
            trace = os.path.join(args.dir, f"{shape}-{n}.csv")
            if not os.path.exists(trace):
                SHAPES[shape](trace, n)
            for command in commands:
                outputs = {}
                for binary in binaries:
                    key = (binary, shape, command)
                    if key in gave_up:
                        seconds, out = None, "skipped"
                    else:
                        seconds, out = run(binary, command, trace, args.timeout)
                    if seconds is None:
                        gave_up.add(key)
                    times[(binary, shape, n, command)] = seconds
                    blocks = ""
                    if seconds is not None:
                        outputs[binary] = out
                        if command.startswith("train"):
                            for line in out.splitlines():
                                if line.strip().startswith("blocks"):
                                    blocks = line.split()[-1]
                    shown = f"{seconds:.3f}" if seconds is not None else f">{args.timeout:.0f} ({out})"
                    print(f"| {binary} | {shape} | {n} | {command} | {shown} | {blocks} |", flush=True)
                # Every binary must print the same statistics (the same plans).
                if len(set(outputs.values())) > 1:
                    print(f"  WARNING: the binaries print different results for {shape} {n} {command}")

    print()
    print("| binary | shape | command | exponent (log-log slope, n = %d..%d) | between consecutive n |" % (ns[0], ns[-1]))
    print("|---|---|---|---:|---|")
    for binary in binaries:
        for shape in shapes:
            for command in commands:
                first = times.get((binary, shape, ns[0], command))
                last_n, last, bound = ns[-1], times.get((binary, shape, ns[-1], command)), ""
                if last is None:
                    # Timed out: the timeout is a lower bound of the time.
                    last, bound = args.timeout, ">= "
                if first is None or first <= 0:
                    slope = "n/a"
                else:
                    slope = f"{bound}{math.log(last / first) / math.log(last_n / ns[0]):.2f}"
                steps = []
                for a, b in zip(ns, ns[1:]):
                    ta, tb = times.get((binary, shape, a, command)), times.get((binary, shape, b, command))
                    steps.append(f"{math.log(tb / ta) / math.log(b / a):.2f}" if ta and tb else "-")
                print(f"| {binary} | {shape} | {command} | {slope} | {' '.join(steps)} |")


if __name__ == "__main__":
    main()
