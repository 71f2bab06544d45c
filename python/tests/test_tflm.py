"""memplan's offline plans in the real TFLite Micro interpreter (pip package `tflite-micro`).

Every model of the test set (the committed fixtures, plus `../shared/tflite/` when present)
runs twice in TFLM: as given, and with memplan's offline plan embedded by
`memplan plan --write-offline-plan`. The outputs must be bit-identical, TFLM's head with
the plan must equal the head memplan reports, and memplan's `tflm-greedy` must equal
TFLM's own head. Every written model also passes `memplan check`; a planted overlap must
fail it. Set MEMPLAN_TFLM_REPORT=PATH to get the table of heads as Markdown.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from tflite_micro import runtime
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as schema

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "crates/memplan-tflite/tests/data"
SHARED = ROOT.parent / "shared/tflite"
SHARING_RS = ROOT / "crates/memplan-tflite/src/sharing.rs"
ARENA_SIZE = 4 << 20


def all_models():
    models = sorted(FIXTURES.glob("*.tflite"))
    if SHARED.is_dir():
        models += sorted(SHARED.glob("*.tflite"))
    else:
        print("skipping ../shared/tflite: ../shared not found", file=sys.stderr)
    return models


MODELS = all_models()


@pytest.fixture(scope="session")
def memplan_bin():
    binary = os.environ.get("MEMPLAN_BIN")
    if binary:
        return binary
    subprocess.run(["cargo", "build", "-q", "-p", "memplan-cli"], cwd=ROOT, check=True)
    return str(ROOT / "target/debug/memplan")


def memplan(binary, *args, expect=0):
    done = subprocess.run([binary, *map(str, args)], capture_output=True, text=True)
    assert done.returncode == expect, (
        f"memplan {' '.join(map(str, args))} exited {done.returncode}, not {expect}:\n"
        f"{done.stdout}\n{done.stderr}"
    )
    return done


def capture_fd(fd, fn):
    """Runs fn() with the OS-level descriptor fd sent to a file (TFLM prints from C)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(fd)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), fd)
        try:
            result = fn()
        finally:
            os.dup2(saved, fd)
            os.close(saved)
        tmp.seek(0)
        return result, tmp.read().decode("utf-8", "replace")


def run_tflm(data, seed=7):
    """Runs the model once on seeded random inputs: (outputs, head bytes)."""
    interpreter, _ = capture_fd(
        2, lambda: runtime.Interpreter.from_bytes(data, arena_size=ARENA_SIZE)
    )
    subgraph = schema.Model.GetRootAsModel(data, 0).Subgraphs(0)
    rng = np.random.default_rng(seed)
    for i in range(subgraph.InputsLength()):
        details = interpreter.get_input_details(i)
        dtype = details["dtype"]
        shape = tuple(int(d) for d in details["shape"])
        if np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            x = rng.integers(info.min, info.max + 1, size=shape, dtype=dtype)
        else:
            x = rng.standard_normal(shape).astype(dtype)
        interpreter.set_input(x, i)
    interpreter.invoke()
    outputs = [np.array(interpreter.get_output(j)) for j in range(subgraph.OutputsLength())]
    _, log = capture_fd(2, interpreter.print_allocations)
    match = re.search(r"Arena allocation head (\d+) bytes", log)
    assert match, f"TFLM printed no head:\n{log}"
    return outputs, int(match.group(1))


def assert_identical(expected, actual, what):
    assert len(expected) == len(actual), what
    for j, (a, b) in enumerate(zip(expected, actual)):
        assert a.dtype == b.dtype and a.shape == b.shape, f"{what}: output {j}"
        assert np.array_equal(a, b), f"{what}: output {j} differs in {np.sum(a != b)} elements"


# (label, memplan plan arguments)
VARIANTS = [
    ("best-of", ["--planner", "best-of"]),
    ("search", ["--planner", "search", "--time-limit", "2"]),
    ("best-of, no sharing", ["--planner", "best-of", "--no-alias", "--no-inplace"]),
]

REPORT_ROWS = []


@pytest.mark.parametrize("model", MODELS, ids=[m.stem for m in MODELS])
def test_offline_plan_runs_bit_identical_in_tflm(model, memplan_bin, tmp_path):
    data = model.read_bytes()
    reference, tflm_head = run_tflm(data)

    own = json.loads(
        memplan(
            memplan_bin, "plan", model, "--planner", "tflm-greedy",
            "--no-alias", "--no-inplace", "-f", "json",
        ).stdout
    )
    assert own["arena_bytes"] == tflm_head, "tflm-greedy must reproduce TFLM's own head"

    heads = {}
    for label, args in VARIANTS:
        out = tmp_path / f"{label.replace(' ', '_').replace(',', '')}.tflite"
        planned = json.loads(
            memplan(memplan_bin, "plan", model, *args, "-f", "json",
                    "--write-offline-plan", out).stdout
        )
        assert planned["tflm_own_head_bytes"] == tflm_head
        memplan(memplan_bin, "check", out)
        outputs, head = run_tflm(out.read_bytes())
        assert_identical(reference, outputs, f"{model.name} with the {label} plan")
        assert head == planned["tflm_head_bytes"], (
            f"{model.name} {label}: TFLM's head {head} is not the {planned['tflm_head_bytes']} memplan reported"
        )
        assert head <= tflm_head, f"{model.name} {label}: {head} > TFLM's own {tflm_head}"
        heads[label] = (head, planned["lower_bound_bytes"])

    best = min(h for h, _ in heads.values())
    bound = heads["best-of, no sharing"][1]
    if best > bound and tflm_head > bound:
        # TFLM's greedy above the bound: memplan must do better than TFLM there.
        assert best < tflm_head, f"{model.name}: no saving where TFLM is above the bound"
    if model.stem == "vww_mbv1_025":
        assert best <= 55_296
    REPORT_ROWS.append((model.stem, tflm_head, heads))
    report = os.environ.get("MEMPLAN_TFLM_REPORT")
    if report:
        with open(report, "a") as f:
            cells = " | ".join(f"{heads[label][0]:,}" for label, _ in VARIANTS)
            f.write(f"| {model.stem} | {tflm_head:,} | {cells} | {bound:,} | yes |\n")


def offline_words(data):
    """(position, count) of the OfflineMemoryAllocation words in the file's bytes."""
    root = schema.Model.GetRootAsModel(data, 0)
    for i in range(root.MetadataLength()):
        entry = root.Metadata(i)
        if entry.Name() == b"OfflineMemoryAllocation":
            table = root.Buffers(entry.Buffer())._tab
            field = table.Offset(4)
            return table.Vector(field), table.VectorLen(field) // 4
    raise AssertionError("no OfflineMemoryAllocation")


def test_planted_overlap_is_caught(memplan_bin, tmp_path):
    model = FIXTURES / "branchy.tflite"
    good = tmp_path / "good.tflite"
    memplan(memplan_bin, "plan", model, "--no-alias", "--no-inplace",
            "--write-offline-plan", good)
    tensors = json.loads(memplan(memplan_bin, "inspect", model, "-f", "json").stdout)["tensors"]
    planned = [t for t in tensors if t["start"] is not None and t["index"] is not None]
    # Two tensors live at one step: an operator's input and its output.
    victim, culprit = next(
        (a, b) for a in planned for b in planned
        if a["index"] < b["index"] and a["start"] < b["end"] and b["start"] < a["end"]
    )
    data = bytearray(good.read_bytes())
    position, count = offline_words(bytes(data))
    words = np.frombuffer(bytes(data[position:position + 4 * count]), dtype="<i4").copy()
    words[3 + culprit["index"]] = words[3 + victim["index"]]
    data[position:position + 4 * count] = words.astype("<i4").tobytes()
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(bytes(data))
    verdict = memplan(memplan_bin, "check", bad, expect=1).stdout
    assert "INVALID" in verdict
    assert victim["name"] in verdict and culprit["name"] in verdict
    # TFLM itself accepts the overlapping plan without a word: that is why check exists.
    run_tflm(bytes(data))


def inplace_operators():
    text = SHARING_RS.read_text()
    block = text[text.index("pub const INPLACE_OPERATORS"):]
    block = block[: block.index("];")]
    return set(re.findall(r"BuiltinOperator::(\w+)", block))


def test_every_sharing_operator_is_verified_in_tflm(memplan_bin, tmp_path):
    """Each operator memplan lets share bytes (RESHAPE and INPLACE_OPERATORS) has shared
    them in some fixture whose outputs stayed bit-identical in TFLM."""
    covered = set()
    for model in sorted(FIXTURES.glob("*.tflite")):
        data = model.read_bytes()
        reference, _ = run_tflm(data)
        out = tmp_path / model.name
        memplan(memplan_bin, "plan", model, "--planner", "search", "--time-limit", "1",
                "--write-offline-plan", out)
        outputs, _ = run_tflm(out.read_bytes())
        assert_identical(reference, outputs, f"{model.name} with sharing")
        tensors = json.loads(memplan(memplan_bin, "inspect", model, "-f", "json").stdout)["tensors"]
        for t in tensors:
            if t["shares_buffer_of"] and t["producer"]:
                covered.add(t["producer"].split("@")[0])
    wanted = inplace_operators() | {"RESHAPE"}
    assert wanted <= covered, f"never verified in TFLM: {sorted(wanted - covered)}"


def with_weights_after_the_flatbuffer(data):
    """The model with every buffer's data moved after the flatbuffer (Buffer.offset/size),
    as converters store models over 2 GiB."""
    import flatbuffers

    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(data, 0))
    moved = []
    for i, buffer in enumerate(model.buffers):
        if buffer.data is not None and len(buffer.data) > 0:
            moved.append((i, bytes(bytearray(buffer.data))))
            buffer.data = None
            buffer.offset = 1 << 63  # a placeholder of the final width, set below
            buffer.size = len(moved[-1][1])

    def pack():
        builder = flatbuffers.Builder(1024)
        builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
        return bytes(builder.Output())

    length = len(pack())
    at = -(-length // 16) * 16
    for i, weights in moved:
        model.buffers[i].offset = at
        at = -(-(at + len(weights)) // 16) * 16
    out = bytearray(pack())
    assert len(out) == length and moved
    for i, weights in moved:
        out += bytes(model.buffers[i].offset - len(out)) + weights
    return bytes(out)


@pytest.mark.parametrize("name", ["branchy.tflite", "mean_tconv.tflite"])
def test_weights_after_the_flatbuffer_are_planned_as_tflm_plans_them(name, memplan_bin, tmp_path):
    """TFLM does not read weights stored after the flatbuffer: it gives those tensors arena
    memory. memplan's predicted heads must be TFLM's, and the caveat must be said."""
    data = with_weights_after_the_flatbuffer((FIXTURES / name).read_bytes())
    model = tmp_path / name
    model.write_bytes(data)
    _, tflm_head = run_tflm(data)
    _, inline_head = run_tflm((FIXTURES / name).read_bytes())
    assert tflm_head > inline_head, "TFLM now plans the weights too"
    out = tmp_path / f"planned-{name}"
    done = memplan(memplan_bin, "plan", model, "-f", "json", "--write-offline-plan", out)
    planned = json.loads(done.stdout)
    assert planned["tflm_own_head_bytes"] == tflm_head
    assert any("after the flatbuffer" in c for c in planned["tflm_caveats"]), planned["tflm_caveats"]
    assert "after the flatbuffer" in done.stderr and "warning:" in done.stderr
    _, head = run_tflm(out.read_bytes())
    assert head == planned["tflm_head_bytes"]
    memplan(memplan_bin, "check", out)


def test_a_dynamic_output_tflm_refuses_is_a_caveat(memplan_bin, tmp_path):
    data = (FIXTURES / "branchy.tflite").read_bytes()
    import flatbuffers

    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(data, 0))
    subgraph = model.subgraphs[0]
    tensor = subgraph.tensors[subgraph.operators[0].outputs[0]]
    tensor.shape = [0] + list(tensor.shape[1:])
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    path = tmp_path / "dynamic.tflite"
    path.write_bytes(bytes(builder.Output()))
    with pytest.raises(RuntimeError):
        run_tflm(path.read_bytes())
    done = memplan(memplan_bin, "plan", path, "-f", "json")
    caveats = json.loads(done.stdout)["tflm_caveats"]
    assert any("dynamic" in c for c in caveats), caveats
    assert "warning:" in done.stderr
