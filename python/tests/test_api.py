"""The `memplan` Python package: problems, planners, the checker, readers, errors, the
GIL and Ctrl-C. Runs against the installed package (`pip install .`)."""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import memplan

ROOT = Path(__file__).resolve().parents[2]


def three():
    return memplan.Problem(
        [
            memplan.Buffer("a", 1024, 0, 2),
            memplan.Buffer("b", 512, 1, 3),
            memplan.Buffer("c", 1024, 2, 4),
        ]
    )


def test_plan_check_and_bound():
    problem = three()
    assert len(problem) == 3 and problem.names == ["a", "b", "c"]
    assert problem.lower_bound() == 1536
    # The default planner: search for at most a second, from best-of's plan.
    result = memplan.plan(problem)
    assert result.planner == "search" and result.proven_optimal and result.chosen is None
    greedy = memplan.plan(problem, "best-of")
    assert greedy.planner == "best-of" and greedy.chosen
    assert result.arena <= greedy.arena
    assert (result.arena, result.lower_bound, result.ratio) == (1536, 1536, 1.0)
    assert (result.max_live, result.alignment) == (1536, 1)
    assert memplan.check(problem, result) == []
    assert result.as_dict()["b"] == result.offset_of("b")
    with pytest.raises(memplan.InputError, match='no buffer named "z"'):
        result.offset_of("z")


@pytest.mark.parametrize("name", [name for name, _ in memplan.planners()])
def test_every_planner_gives_a_checked_plan(name):
    problem = three()
    result = memplan.plan(problem, name)
    assert memplan.check(problem, result) == []
    assert result.arena >= problem.lower_bound()


def test_search_reports_optimality_and_options_are_checked():
    result = memplan.plan(three(), "search", time_limit=1.0, seed=3, threads=1)
    assert result.proven_optimal is True and result.stop in ("lower-bound", "exhausted")
    with pytest.raises(memplan.InputError, match="time_limit, seed and threads apply"):
        memplan.plan(three(), "best-of", time_limit=1.0)
    with pytest.raises(memplan.InputError, match="unknown planner 'nope'"):
        memplan.plan(three(), "nope")
    with pytest.raises(memplan.InputError, match="metric"):
        memplan.plan(three(), "strip", metric="no-such-metric")
    assert memplan.plan(three(), "strip", metric="size", max_iters=2).arena == 1536
    assert memplan.plan(three(), "strip", max_reads=0).arena == 1536
    with pytest.raises(memplan.InputError, match="max_reads apply to planner='strip'"):
        memplan.plan(three(), "best-of", max_reads=10)
    with pytest.raises(OverflowError):
        memplan.plan(three(), "strip", max_reads=-1)


def test_alignment_raises_every_offset():
    result = memplan.plan(
        memplan.Problem.from_lists([3, 5, 7], [0, 0, 0], [1, 1, 1]), alignment=64
    )
    assert all(o % 64 == 0 for o in result.offsets)


def test_check_lists_every_violation():
    problem = three()
    violations = memplan.check(problem, [0, 0, 0])
    kinds = sorted((v.kind, tuple(v.buffers)) for v in violations)
    assert kinds == [("overlap", ("a", "b")), ("overlap", ("b", "c"))]
    assert "share" in str(violations[0]) or "overlap" in str(violations[0]).lower()
    assert memplan.check(problem, [0, 0])[0].kind == "wrong-length"
    aligned = memplan.Problem([memplan.Buffer("x", 8, 0, 1, alignment=16)])
    assert memplan.check(aligned, [8])[0].kind == "misaligned"


def test_bad_problems_raise_input_error_with_the_reason():
    with pytest.raises(memplan.InputError, match="starts has 1 entries but sizes has 2"):
        memplan.Problem.from_lists([1, 2], [0], [1, 2])
    with pytest.raises(memplan.InputError):
        memplan.Problem([memplan.Buffer("a", 4, 3, 3)])  # empty lifetime
    with pytest.raises(memplan.InputError):
        memplan.Problem([memplan.Buffer("a", 4, 0, 1), memplan.Buffer("a", 4, 0, 1)])
    with pytest.raises(memplan.InputError, match=r"bad.csv:2: column .size.: .oops. is not a number"):
        memplan.Problem.from_csv("id,lower,upper,size\nx,0,1,oops\n", "bad.csv")
    assert issubclass(memplan.InputError, memplan.MemplanError)


def test_fixed_offsets_are_kept_and_clashes_are_planning_errors():
    problem = memplan.Problem(
        [memplan.Buffer("pinned", 64, 0, 4, offset=128), memplan.Buffer("free", 64, 0, 4)]
    )
    result = memplan.plan(problem)
    assert result.offset_of("pinned") == 128 and memplan.check(problem, result) == []
    clash = memplan.Problem(
        [memplan.Buffer("p", 64, 0, 4, offset=0), memplan.Buffer("q", 64, 0, 4, offset=32)]
    )
    with pytest.raises(memplan.PlanningError, match="fixed offsets"):
        memplan.plan(clash)


def test_json_and_csv_round_trips():
    problem = three()
    again = memplan.Problem.from_csv(problem.to_csv())
    assert [(b.name, b.size, b.start, b.end) for b in again.buffers] == [
        (b.name, b.size, b.start, b.end) for b in problem.buffers
    ]
    result = memplan.plan(problem, "search", time_limit=1)
    text = result.to_json(problem)
    assert json.loads(text)["planner"] == "search"
    back = memplan.read_plan(text, problem)
    assert back.offsets == result.offsets and back.planner == "search"
    csv_back = memplan.read_plan(result.to_csv(problem), problem)
    assert csv_back.offsets == result.offsets


def test_from_table_takes_dicts_and_dataframe_like_objects():
    table = {"id": ["x", "y"], "lower": [0, 1], "upper": [2, 3], "size": [10, 20],
             "offset": [None, float("nan")]}
    problem = memplan.from_table(table)
    assert problem.names == ["x", "y"] and problem.lower_bound() == 30

    class Column(list):
        def tolist(self):
            return list(self)

    class Frame:
        def __init__(self, columns):
            self.columns = columns

        def __getitem__(self, key):
            return Column(self.columns[key])

    frame = Frame({"name": ["p"], "start": [0], "end": [1], "size": [4], "alignment": [8]})
    assert memplan.from_table(frame).buffers[0].alignment == 8
    with pytest.raises(memplan.InputError, match="no 'end' column"):
        memplan.from_table({"size": [1], "start": [0]})


def test_models_load():
    onnx = memplan.load_onnx(ROOT / "crates/memplan-onnx/tests/data/small.onnx")
    assert len(onnx) > 0 and memplan.check(onnx, memplan.plan(onnx)) == []
    tflite = memplan.load_tflite(ROOT / "crates/memplan-tflite/tests/data/branchy.tflite")
    assert memplan.plan(tflite, "search", time_limit=2).arena == 3584
    with pytest.raises(memplan.ModelError, match="not a TFLite model"):
        memplan.load_tflite(ROOT / "examples/small.csv")
    with pytest.raises(memplan.ModelError, match="not a valid ONNX model"):
        memplan.load_onnx(ROOT / "examples/small.csv")


def test_the_exception_hierarchy():
    assert issubclass(memplan.InputError, memplan.MemplanError)
    assert issubclass(memplan.FormatError, memplan.InputError)
    assert issubclass(memplan.ModelError, memplan.InputError)
    assert issubclass(memplan.PlanningError, memplan.MemplanError)
    assert not issubclass(memplan.PlanningError, memplan.InputError)
    assert issubclass(memplan.MemplanError, Exception)
    for name in ("MemplanError", "InputError", "FormatError", "ModelError", "PlanningError"):
        assert getattr(memplan, name).__module__ == "memplan"
    with pytest.raises(memplan.FormatError, match="bad.csv:2"):
        memplan.Problem.from_csv("id,lower,upper,size\nx,0,1,oops\n", "bad.csv")
    with pytest.raises(memplan.FormatError):
        memplan.read_plan("{not json", three())
    with pytest.raises(memplan.FormatError):
        memplan.read_plan("id,lower,upper,size,offset\nz,0,1,1,0\n", three())
    # A problem that breaks a rule is an InputError, not a FormatError.
    with pytest.raises(memplan.InputError) as info:
        memplan.Problem([memplan.Buffer("a", 4, 3, 3)])
    assert type(info.value) is memplan.InputError


@pytest.mark.parametrize(
    "load", [memplan.load_onnx, memplan.load_tflite, memplan.read_csv], ids=["onnx", "tflite", "csv"]
)
def test_files_that_cannot_be_read_raise_the_builtin_os_errors(load, tmp_path):
    missing = tmp_path / "missing.model"
    with pytest.raises(FileNotFoundError, match="missing.model") as info:
        load(missing)
    assert info.value.filename == str(missing)
    with pytest.raises(IsADirectoryError, match=re.escape(str(tmp_path))):
        load(tmp_path)
    with pytest.raises(NotADirectoryError):
        load(ROOT / "examples/small.csv" / "below")
    # str paths as well as Path objects
    with pytest.raises(FileNotFoundError):
        load(str(missing))


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root reads any file"
)
@pytest.mark.parametrize(
    "load", [memplan.load_onnx, memplan.load_tflite, memplan.read_csv], ids=["onnx", "tflite", "csv"]
)
def test_an_unreadable_file_is_a_permission_error(load, tmp_path):
    path = tmp_path / "locked.model"
    path.write_bytes(b"x")
    path.chmod(0)
    with pytest.raises(PermissionError, match="locked.model"):
        load(path)


def test_read_csv_of_binary_is_a_format_error(tmp_path):
    path = tmp_path / "binary.csv"
    path.write_bytes(b"id,lower,upper,size\n\xff\xfe,0,1,1\n")
    with pytest.raises(memplan.FormatError, match="not UTF-8"):
        memplan.read_csv(path)


def test_the_version_is_cargo_workspace_version():
    import importlib.metadata

    text = (ROOT / "Cargo.toml").read_text(encoding="utf-8")
    section = text.split("[workspace.package]", 1)[1].split("\n[", 1)[0]
    version = re.search(r'^version\s*=\s*"([^"]+)"', section, re.M).group(1)
    assert memplan.__version__ == version
    assert memplan._memplan.__version__ == version
    assert importlib.metadata.version("memplan") == version


def random_problem(n, seed=1):
    import random

    rng = random.Random(seed)
    sizes, starts, ends = [], [], []
    for _ in range(n):
        start = rng.randrange(0, n)
        sizes.append(rng.randrange(1, 1 << 16))
        starts.append(start)
        ends.append(start + rng.randrange(1, 200))
    return memplan.Problem.from_lists(sizes, starts, ends)


def test_planning_releases_the_gil():
    problem = random_problem(3000)
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.01)

    thread = threading.Thread(target=ticker)
    thread.start()
    try:
        result = memplan.plan(problem, "search", time_limit=1.5)
    finally:
        stop.set()
        thread.join()
    assert memplan.check(problem, result) == []
    # With the GIL held for 1.5 s, the ticker would not run at all meanwhile.
    assert len(ticks) > 50


def search_interrupted_by_ctrl_c(body):
    """Runs `body` (a search on `problem`, printing its outcome) in a child Python, sends
    it SIGINT 2 s after it is ready, and returns what it printed and the seconds from the
    signal to its end."""
    script = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import memplan
        from test_api import random_problem
        problem = random_problem(4000)
        print("ready", flush=True)
        started = time.monotonic()
        """
    ) + textwrap.dedent(body)
    # A runner that starts the tests in the background (non-interactive `cmd &`) leaves
    # SIGINT ignored, and Python installs no KeyboardInterrupt handler in a child that
    # inherits that: give the child the default disposition a terminal would.
    child = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert child.stdout.readline().strip() == "ready"
    time.sleep(2.0)
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=90)
    return out, time.monotonic() - sent


def test_ctrl_c_interrupts_search_and_returns_its_best_plan():
    out, _ = search_interrupted_by_ctrl_c(
        """
        result = memplan.plan(problem, "search", time_limit=120)
        print(result.stop, round(time.monotonic() - started, 1),
              len(memplan.check(problem, result)), flush=True)
        """
    )
    stop, seconds, violations = out.split()
    assert stop == "interrupted"
    assert float(seconds) < 60
    assert violations == "0"


def test_ctrl_c_raises_promptly_when_no_partial_plan_is_wanted():
    # With return_on_interrupt=False, KeyboardInterrupt is raised soon after the signal,
    # not after the whole time limit (it was ignored for all of it).
    out, after_signal = search_interrupted_by_ctrl_c(
        """
        try:
            memplan.plan(problem, "search", time_limit=120, return_on_interrupt=False)
            print("returned", flush=True)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        """
    )
    assert out.split() == ["interrupted"], out
    assert after_signal < 60, out


def test_a_plan_records_its_alignment_and_its_problem():
    problem = memplan.Problem.from_lists([3, 5, 7], [0, 1, 2], [2, 3, 4])
    result = memplan.plan(problem, alignment=64)
    assert result.alignment == 64
    assert json.loads(result.to_json(problem))["alignment"] == 64
    assert memplan.check(problem, result) == []
    # The JSON read back is held to 64 bytes: a buffer moved to a 16-aligned offset fails.
    data = json.loads(result.to_json(problem))
    moved = next(b for b in data["buffers"] if b["offset"] > 0)
    moved["offset"] -= 48
    moved.pop("top", None)
    back = memplan.read_plan(json.dumps(data), problem)
    assert back.alignment == 64
    assert any(v.kind == "misaligned" for v in memplan.check(problem, back))
    # A plan of another problem of the same length is refused, not checked.
    other = memplan.Problem.from_lists([3, 5, 7], [0, 1, 2], [2, 3, 4], names=["p", "q", "r"])
    with pytest.raises(memplan.InputError, match="made for another problem"):
        result.to_json(other)
    with pytest.raises(memplan.InputError, match="made for another problem"):
        memplan.check(other, result)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), -1.0, 1e300])
def test_a_bad_time_limit_is_a_value_error_naming_it(bad):
    with pytest.raises(ValueError, match="time_limit"):
        memplan.plan(three(), "search", time_limit=bad)


def test_search_proves_a_bound_above_max_live_and_reports_it():
    # Two 3-byte buffers aligned to 4 and live together: max-live says 6, but the second
    # cannot start before 4, so 7 is optimal, and search proves it.
    problem = memplan.Problem(
        [memplan.Buffer("a", 3, 0, 2, alignment=4), memplan.Buffer("b", 3, 0, 2, alignment=4)]
    )
    result = memplan.plan(problem, "search", time_limit=5.0, threads=1)
    assert result.proven_optimal is True
    assert (result.arena, result.max_live, result.lower_bound) == (7, 6, 7)
    assert result.ratio == 1.0
    data = json.loads(result.to_json(problem))
    assert (data["lower_bound_bytes"], data["search_lower_bound"]) == (6, 7)
    # Other planners keep max-live as their bound.
    assert memplan.plan(problem, "best-of").lower_bound == 6


def _onnx_with_symbolic_batch(path):
    """A one-node ONNX model (Relu) whose input 'x' has the symbolic dim 'batch', written
    with a few lines of protobuf encoding (no onnx package needed)."""

    def varint(n):
        out = bytearray()
        while True:
            byte, n = n & 0x7F, n >> 7
            out.append(byte | (0x80 if n else 0))
            if not n:
                return bytes(out)

    def field(number, value):
        if isinstance(value, int):
            return varint(number << 3) + varint(value)
        data = value.encode() if isinstance(value, str) else value
        return varint(number << 3 | 2) + varint(len(data)) + data

    def value_info(name, dims):
        shape = b"".join(
            field(1, field(2, d) if isinstance(d, str) else field(1, d)) for d in dims
        )
        tensor = field(1, 1) + field(2, shape)  # elem_type FLOAT, shape
        return field(1, name) + field(2, field(1, tensor))

    node = field(1, "x") + field(2, "y") + field(3, "relu") + field(4, "Relu")
    graph = (
        field(1, node)
        + field(2, "g")
        + field(11, value_info("x", ["batch", 4]))
        + field(12, value_info("y", ["batch", 4]))
    )
    model = field(1, 8) + field(8, field(1, "") + field(2, 17)) + field(7, graph)
    path.write_bytes(model)
    return path


def test_onnx_shape_errors_name_the_python_arguments(tmp_path):
    model = _onnx_with_symbolic_batch(tmp_path / "symbolic.onnx")
    for call in (
        lambda: memplan.load_onnx(model),
        lambda: memplan.plan_file(model),
    ):
        with pytest.raises(memplan.ModelError) as error:
            call()
        text = str(error.value)
        assert 'input_shapes={"x": [' in text and 'dims={"batch": n}' in text, text
        assert "--input-shape" not in text and "--dim" not in text, text
    problem = memplan.load_onnx(model, dims={"batch": 2})
    assert problem.buffers and all(b.size == 2 * 4 * 4 for b in problem.buffers)
    with pytest.raises(memplan.ModelError) as error:
        memplan.load_onnx(model, dims={"batch": 2, "nope": 1})
    text = str(error.value)
    assert "dims names 'nope'" in text and "--dim" not in text, text
