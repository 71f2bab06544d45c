"""memplan's pool inside a real PyTorch training process (LD_PRELOAD), the short version
of scripts/bench_allocators.py: a small transformer trains for a few iterations under
glibc and under libmemplan_preload.so; the losses must be bit-identical, the pool must
serve the steady iterations from its arena, and those iterations must not fault."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ROOT / "scripts/train_step.py"


def library():
    for profile in ("release", "debug"):
        path = ROOT / "target" / profile / "libmemplan_preload.so"
        if path.exists():
            return path
    subprocess.run(["cargo", "build", "-q", "-p", "memplan-preload"], cwd=ROOT, check=True)
    return ROOT / "target/debug/libmemplan_preload.so"


def train(env_extra, iters=10):
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "GLIBC_TUNABLES")}
    env.update(env_extra)
    out = subprocess.run(
        [sys.executable, str(TRAIN), "--model", "transformer", "--iters", str(iters)],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return [r for r in rows if "iter" in r], rows[-1], out.stderr


@pytest.mark.parametrize("plan", ["offsets", "size-classes"])
def test_training_under_the_pool_is_identical_and_fault_free(plan):
    glibc, _, _ = train({})
    pooled, last, stderr = train(
        {"LD_PRELOAD": str(library()), "MEMPLAN_POOL_SUMMARY": "1", "MEMPLAN_POOL_LOG": "1",
         "MEMPLAN_POOL_PLAN": plan}
    )
    assert [r["loss"] for r in pooled] == [r["loss"] for r in glibc]
    assert "iteration found" in stderr and "serving" in stderr, stderr[-2000:]
    summary = last.get("memplan_pool_summary", "")
    hits = int(summary.split(" served from the arena")[0].rsplit(", ", 1)[1])
    assert hits > 0, summary
    # The last iterations are served from the arena mapped once: no page faults left.
    assert all(r["minflt"] <= 100 for r in pooled[-3:]), [r["minflt"] for r in pooled]
