"""`memplan.plan_file` and `memplan plan` are one library (`memplan-session`): for every
input kind and every planner spec they give the same plan (every buffer's offset), arena
and bound. Runs the CLI (MEMPLAN_BIN, else a debug build) beside the installed package."""

import json
import os
import subprocess
from pathlib import Path

import pytest

import memplan

ROOT = Path(__file__).resolve().parents[2]

INPUTS = [
    "examples/small.csv",  # minimalloc CSV
    "examples/memops.csv",  # memory-operation sequence
    "examples/pool_trace.csv",  # pool allocation trace
    "examples/small_cnn.json",  # graph JSON
    "examples/exclusive_example.json",  # graph JSON, the exclusive worked example
    "crates/memplan-onnx/tests/data/small.onnx",  # ONNX
    "crates/memplan-tflite/tests/data/branchy.tflite",  # TFLite
]

# Deterministic specs (search: one thread and a node limit the CLI also applies would be
# needed for equal plans; its proof is compared instead, below).
SPECS = [
    "naive",
    "best-of",
    "greedy-size-firstfit",
    "strip",
    "strip:placement=stacked",
    "exclusive",
    "exclusive:fragmented",
    "exclusive:orders=all",
    "npu",
    "npu:match=size",
]

GRAPH_ONLY = {"exclusive:orders=all"}


@pytest.fixture(scope="module")
def memplan_bin():
    binary = os.environ.get("MEMPLAN_BIN")
    if binary:
        return binary
    subprocess.run(["cargo", "build", "-q", "-p", "memplan-cli"], cwd=ROOT, check=True)
    return str(ROOT / "target/debug/memplan")


def cli_plan(binary, path, spec):
    done = subprocess.run(
        [binary, "plan", str(ROOT / path), "--planner", spec, "-f", "json"],
        capture_output=True,
        text=True,
    )
    return done.returncode, done.stdout, done.stderr


def is_graph(path):
    return path.endswith((".json", ".onnx"))


@pytest.mark.parametrize("path", INPUTS)
@pytest.mark.parametrize("spec", SPECS)
def test_cli_and_python_plan_alike(memplan_bin, path, spec):
    code, out, err = cli_plan(memplan_bin, path, spec)
    if spec in GRAPH_ONLY and not is_graph(path):
        assert code == 2, err
        with pytest.raises(memplan.InputError, match="needs a graph"):
            memplan.plan_file(ROOT / path, spec)
        return
    assert code == 0, err
    cli = json.loads(out)
    problem, result = memplan.plan_file(ROOT / path, spec)
    assert memplan.check(problem, result) == []
    assert result.arena == cli["arena_bytes"]
    assert result.max_live == cli["lower_bound_bytes"]
    assert result.lower_bound == cli["lower_bound_bytes"]
    assert result.chosen == cli.get("chosen_planner")
    ids = [b["id"] for b in cli["buffers"]]
    assert result.names == ids
    assert result.offsets == [b["offset"] for b in cli["buffers"]]


@pytest.mark.parametrize("path", INPUTS)
def test_search_proves_the_same_bound_in_both(memplan_bin, path):
    code, out, err = cli_plan(memplan_bin, path, "search")
    assert code == 0, err
    cli = json.loads(out)
    problem, result = memplan.plan_file(ROOT / path, "search", time_limit=5.0)
    assert memplan.check(problem, result) == []
    assert result.max_live == cli["lower_bound_bytes"]
    if cli["proven_optimal"] and result.proven_optimal:
        assert result.arena == cli["arena_bytes"]
        assert result.lower_bound == cli["search_lower_bound"]


def test_plan_file_errors_are_the_right_kind(tmp_path):
    with pytest.raises(FileNotFoundError):
        memplan.plan_file(tmp_path / "missing.onnx")
    with pytest.raises(memplan.InputError, match="unknown planner"):
        memplan.plan_file(ROOT / "examples/small.csv", "nonesuch")
    with pytest.raises(memplan.InputError, match="apply to planner='search'"):
        memplan.plan_file(ROOT / "examples/small.csv", "best-of", time_limit=1.0)
    with pytest.raises(ValueError, match="alignment"):
        memplan.plan_file(ROOT / "examples/small.csv", alignment=0)
    zero = tmp_path / "zero.onnx"
    zero.write_bytes(bytes(100))
    with pytest.raises(memplan.ModelError, match="cannot start a protobuf message"):
        memplan.plan_file(zero)
