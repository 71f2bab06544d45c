#!/usr/bin/env python3
"""Planning time of `memplan swap` against n on two PipeDream profiles (issue #45).

Two cases, each run with the release CLI (`memplan swap ... -f json`):

- `chain`: `node0 (Input) -> node1 -> ... -> nodeN` (1 ms forward, 2 ms backward,
  activations cycling over 1, 2, 4 and 8 MB, as `examples/swap_chain.rs`), planned with
  `--planner all --max-overhead 5% --link 12GB/s` (method, lms and everything);
- `fanout`: `node0 (Input) -> node1 (stem) -> node2 .. node(N-2)` (branches, each read by
  the stem only) `-> node(N-1)` (one layer reading every branch), N layers in all,
  planned with `--planner method --budget 50% --link 12GB/s`.

N counts the profile's layers (the training step has about 2N nodes). Several
`--binary` builds run side by side (each N: every binary, one after the other), so that a
build before a change and one after are measured under the same load. A run past
`--cap` seconds is killed and shown as `>CAP`; larger N of that binary and case are then
skipped. Prints per case a markdown table (wall and user seconds, peak RSS, a digest of
the JSON result so that plans can be compared across builds) and the growth exponent of
each binary: log(t2 / t1) / log(n2 / n1) between consecutive finished sizes and a
least-squares fit over them (user time; the machine is shared, so wall time includes
waiting for a core).

    cargo build --release -p memplan-cli
    python3 scripts/bench_swap_scale.py --binary /tmp/memplan-before --binary target/release/memplan \
        [--chain 1000 8000 10000 100000] [--fanout 1000 10000 100000] [--cap 120]

Python 3 standard library only. No timed test uses this; doc/swap.md has the numbers.
"""

import argparse
import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time


def chain(n: int) -> str:
    lines = [
        "node0 -- Input -- forward_compute_time=0.000, backward_compute_time=0.000, "
        "activation_size=1000000.000, parameter_size=0.000"
    ]
    for i in range(1, n + 1):
        mb = 1 << (i % 4)
        lines.append(
            f"node{i} -- Conv2d(8, 8) -- forward_compute_time=1.000, backward_compute_time=2.000, "
            f"activation_size={mb * 1_000_000}.000, parameter_size=1000.000"
        )
    lines += [f"\tnode{i - 1} -- node{i}" for i in range(1, n + 1)]
    return "\n".join(lines) + "\n"


def fanout(n: int) -> str:
    w = max(1, n - 3)
    lines = [
        "node0 -- Input -- forward_compute_time=0.000, backward_compute_time=0.000, "
        "activation_size=1000000.000, parameter_size=0.000",
        "node1 -- Conv2d(8, 8) -- forward_compute_time=1.000, backward_compute_time=2.000, "
        "activation_size=4000000.000, parameter_size=1000.000",
    ]
    for i in range(2, w + 2):
        mb = 1 << (i % 4)
        lines.append(
            f"node{i} -- Conv2d(8, 8) -- forward_compute_time=0.500, backward_compute_time=1.000, "
            f"activation_size={mb * 100_000}.000, parameter_size=100.000"
        )
    last = w + 2
    lines.append(
        f"node{last} -- Concat -- forward_compute_time=1.000, backward_compute_time=1.000, "
        "activation_size=2000000.000, parameter_size=0.000"
    )
    lines.append("\tnode0 -- node1")
    lines += [f"\tnode1 -- node{i}" for i in range(2, w + 2)]
    lines += [f"\tnode{i} -- node{last}" for i in range(2, w + 2)]
    return "\n".join(lines) + "\n"


CASES = {
    "chain": (chain, ["--planner", "all", "--max-overhead", "5%", "--link", "12GB/s"]),
    "fanout": (fanout, ["--planner", "method", "--budget", "50%", "--link", "12GB/s"]),
}


def run(binary: str, profile: str, flags, cap: float):
    """(wall s, user s, peak RSS MiB, digest) of one run, or None past `cap`."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.monotonic()
        child = subprocess.Popen(
            [binary, "swap", profile, *flags, "-f", "json"],
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        deadline = start + cap
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                os.killpg(child.pid, signal.SIGKILL)
                os.wait4(child.pid, 0)
                return None
            time.sleep(0.02)
        wall = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"{binary} swap {profile} failed ({code}): {stderr.strip()}")
    result = json.loads(stdout)
    digest = hashlib.sha256(json.dumps(result, sort_keys=True).encode()).hexdigest()[:10]
    return wall, usage.ru_utime, usage.ru_maxrss / 1024, digest


def exponent(xs, ys):
    """Least-squares slope of log(y) against log(x)."""
    lx = [math.log(x) for x in xs]
    ly = [math.log(max(y, 1e-3)) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    den = sum((a - mx) ** 2 for a in lx)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / den if den else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", action="append", help="memplan builds (repeatable)")
    parser.add_argument("--chain", nargs="*", type=int, default=[1000, 8000, 10000, 100000])
    parser.add_argument("--fanout", nargs="*", type=int, default=[1000, 10000, 100000])
    parser.add_argument("--cap", type=float, default=120.0, help="seconds before a run is killed")
    parser.add_argument("--dir", default=None, help="where the profiles are written")
    args = parser.parse_args()
    binaries = args.binary or ["target/release/memplan"]
    for b in binaries:
        if not os.path.exists(b):
            sys.exit(f"{b} not found: cargo build --release -p memplan-cli")
    folder = args.dir or tempfile.mkdtemp(prefix="swapscale")
    os.makedirs(folder, exist_ok=True)
    for case, sizes in [("chain", args.chain), ("fanout", args.fanout)]:
        if not sizes:
            continue
        make, flags = CASES[case]
        print(f"\n### {case}: memplan swap PROFILE {' '.join(flags)} -f json\n")
        print("| N (layers) | binary | wall s | user s | max RSS MiB | result digest |")
        print("|---:|---|---:|---:|---:|---|")
        done = {b: [] for b in binaries}
        stopped = set()
        for n in sizes:
            profile = os.path.join(folder, f"{case}{n}.graph.txt")
            with open(profile, "w") as f:
                f.write(make(n))
            for b in binaries:
                if b in stopped:
                    print(f"| {n} | {b} | skipped | | | |", flush=True)
                    continue
                got = run(b, profile, flags, args.cap)
                if got is None:
                    stopped.add(b)
                    print(f"| {n} | {b} | >{args.cap:.0f} (killed) | | | |", flush=True)
                    continue
                wall, user, rss, digest = got
                done[b].append((n, wall, user))
                print(f"| {n} | {b} | {wall:.2f} | {user:.2f} | {rss:.0f} | {digest} |", flush=True)
        print()
        for b, rows in done.items():
            steps = [
                f"{n1}->{n2}: {math.log(max(u2, 1e-3) / max(u1, 1e-3)) / math.log(n2 / n1):.2f}"
                for (n1, _, u1), (n2, _, u2) in zip(rows, rows[1:])
            ]
            fit = exponent([r[0] for r in rows], [r[2] for r in rows]) if len(rows) > 1 else float("nan")
            print(f"{case} {b}: user-time exponent {', '.join(steps) or '-'}; least squares {fit:.2f}")


if __name__ == "__main__":
    main()
