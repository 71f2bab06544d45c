#!/usr/bin/env python3
"""Scale benchmark of the `exclusive` planner and its every-order mode (issue #40).

Writes two graph JSONs and plans each with every spec under `/usr/bin/time`:

- `chain`: x -> n1 -> ... -> nN, every third operator a `Relu` (so in-place writes are
  decided, in the every-order mode too), the others `Conv`, sizes varying;
- `fanout`: x -> S -> W branches B_i (one `Conv` each, 64..160 floats) -> a `Concat`:
  rule 2 makes every two branches exclusive (W (W - 1) / 2 pairs).

    cargo build --release -p memplan-cli
    python3 scripts/bench_exclusive_scale.py [--chain 100000] [--fanout 5000] \
        [--memplan target/release/memplan] [--memplan OTHER_BUILD ...] [--dir /tmp/exscale]

Several `--memplan` binaries run side by side (one after the other per case, in one run)
so that builds can be compared on the same load. Prints one markdown row per run: binary,
graph, spec, wall and user seconds, max RSS (MiB), the plan's arena / lower bound, and
whether `memplan plan` (which checks its plan before writing it) succeeded.
Python 3 standard library only.
"""

import argparse
import json
import os
import re
import subprocess
import sys

SPECS = ["exclusive", "exclusive:fragmented", "exclusive:orders=all"]


def chain(n):
    values = [{"name": "x", "dtype": "FLOAT", "shape": [1, 256]}]
    nodes = []
    prev = "x"
    prev_len = 256
    for i in range(1, n + 1):
        name = f"t{i}"
        op = "Relu" if i % 3 == 0 else "Conv"
        length = prev_len if op == "Relu" else 256 + 16 * (i % 7)
        values.append({"name": name, "dtype": "FLOAT", "shape": [1, length]})
        nodes.append({"name": f"n{i}", "op": op, "inputs": [prev], "outputs": [name]})
        prev, prev_len = name, length
    return {"name": "chain", "inputs": ["x"], "outputs": [prev], "values": values, "nodes": nodes}


def fanout(w):
    values = [
        {"name": "x", "dtype": "FLOAT", "shape": [1, 256]},
        {"name": "s", "dtype": "FLOAT", "shape": [1, 256]},
    ]
    nodes = [{"name": "S", "op": "Conv", "inputs": ["x"], "outputs": ["s"]}]
    branches = []
    for i in range(w):
        name = f"b{i}"
        values.append({"name": name, "dtype": "FLOAT", "shape": [1, 64 + 16 * (i % 7)]})
        nodes.append({"name": f"B{i}", "op": "Conv", "inputs": ["s"], "outputs": [name]})
        branches.append(name)
    values.append({"name": "y", "dtype": "FLOAT", "shape": [1, 256]})
    nodes.append({"name": "J", "op": "Concat", "inputs": branches, "outputs": ["y"]})
    return {"name": "fanout", "inputs": ["x"], "outputs": ["y"], "values": values, "nodes": nodes}


def run(binary, graph, spec, out):
    cmd = ["/usr/bin/time", "-v", binary, "plan", graph, "--planner", spec, "-f", "json", "-o", out]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    err = p.stderr

    def field(pattern, cast):
        m = re.search(pattern, err)
        return cast(m.group(1)) if m else None

    wall = field(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([0-9:.]+)", str)
    if wall:
        parts = [float(x) for x in wall.split(":")]
        wall = sum(v * 60 ** (len(parts) - 1 - k) for k, v in enumerate(parts))
    user = field(r"User time \(seconds\): ([0-9.]+)", float)
    rss = field(r"Maximum resident set size \(kbytes\): ([0-9]+)", int)
    ratio = "-"
    ok = p.returncode == 0
    if ok:
        plan = json.load(open(out))
        ratio = f"{plan['arena_bytes'] / max(1, plan['lower_bound_bytes']):.3f}"
    return wall, user, rss, ratio, ok, err.strip().splitlines()[:1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chain", type=int, default=100000)
    ap.add_argument("--fanout", type=int, default=5000)
    ap.add_argument("--memplan", action="append")
    ap.add_argument("--dir", default="/tmp/exscale")
    ap.add_argument("--specs", default=",".join(SPECS))
    args = ap.parse_args()
    binaries = args.memplan or ["target/release/memplan"]
    os.makedirs(args.dir, exist_ok=True)
    graphs = {
        f"chain {args.chain}": (os.path.join(args.dir, "chain.json"), chain(args.chain)),
        f"fanout {args.fanout}": (os.path.join(args.dir, "fanout.json"), fanout(args.fanout)),
    }
    for path, graph in graphs.values():
        with open(path, "w") as f:
            json.dump(graph, f)
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print("| binary | graph | spec | wall s | user s | max RSS MiB | arena / bound | ok |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    for label, (path, _) in graphs.items():
        for spec in args.specs.split(","):
            for binary in binaries:
                out = os.path.join(args.dir, "plan.json")
                wall, user, rss, ratio, ok, first = run(binary, path, spec, out)
                note = "yes" if ok else f"no: {first[0] if first else ''}"
                rss_mib = f"{rss / 1024:.0f}" if rss else "-"
                print(f"| {binary} | {label} | {spec} | {wall:.2f} | {user:.2f} | {rss_mib} | {ratio} | {note} |")
                sys.stdout.flush()
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
