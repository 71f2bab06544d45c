"""Every argument of every public function and constructor, fed values it must refuse:
NaN, ±inf, negative numbers, 2**64, 2**70 and values of the wrong type (str, None where
None is not allowed, float for int, …). Each must raise ValueError, TypeError,
OverflowError or (for a value that is well typed but means nothing) a memplan error, and
never let a Rust panic through: pyo3's PanicException derives from BaseException, so the
calls are caught as BaseException and a PanicException fails the test by name. Extreme
values that are in range (sizes and alignments near 2**64) must plan or fail cleanly too.
A panic the binding catches itself (MemplanError "internal error: …") fails as well.
"""

from pathlib import Path

import pytest

import memplan

ROOT = Path(__file__).resolve().parents[2]
ONNX = ROOT / "crates/memplan-onnx/tests/data/small.onnx"
TFLITE = ROOT / "crates/memplan-tflite/tests/data/branchy.tflite"

NAN, INF = float("nan"), float("inf")
# Values no integer argument accepts.
BAD_INTS = [NAN, INF, -INF, -1, -(2**70), 2**64, 2**70, 1.5, 1.0, "1", None, [1], object()]
# Values no float (seconds) argument accepts.
BAD_SECONDS = [NAN, INF, -INF, -1, -1.0, 2**64, 2**70, 1e300, "1", [1.0], object()]
# Values no str argument accepts.
BAD_STRS = [1, 1.5, NAN, None, b"bytes", ["a"], object()]
# Values no bool argument accepts (pyo3 takes only bool; None is not "false").
BAD_BOOLS = [2, "yes", None, 1.5, object()]

ALLOWED = (ValueError, TypeError, OverflowError, memplan.MemplanError)


def three():
    return memplan.Problem.from_lists([1024, 512, 1024], [0, 1, 2], [2, 3, 4], names=list("abc"))


def refused(call, allowed=ALLOWED):
    """Runs `call`; it must raise one of `allowed`, and never a panic."""
    try:
        call()
    except BaseException as error:  # a PanicException is a BaseException, not an Exception
        name = type(error).__name__
        assert name != "PanicException", f"a Rust panic crossed into Python: {error}"
        # The binding turns a panic it catches into MemplanError("internal error: …"):
        # still a bug.
        assert "internal error" not in str(error), f"{name}: {error}"
        assert isinstance(error, allowed), f"{name}: {error}"
        return error
    pytest.fail("the call was accepted")


def clean(call):
    """Runs `call`; it may succeed or raise one of ALLOWED, never panic."""
    try:
        return call()
    except BaseException as error:
        name = type(error).__name__
        assert name != "PanicException", f"a Rust panic crossed into Python: {error}"
        # The binding turns a panic it catches into MemplanError("internal error: …"):
        # still a bug.
        assert "internal error" not in str(error), f"{name}: {error}"
        assert isinstance(error, ALLOWED), f"{name}: {error}"
        return error


def cases():
    """(id, call taking the bad value, the bad values) for every numeric, str and bool
    argument of the public API."""
    buffer = dict(name="a", size=4, start=0, end=1, alignment=1, offset=None)
    lists = dict(sizes=[4], starts=[0], ends=[1])
    for arg in ("size", "start", "end", "alignment", "offset"):
        bad = [v for v in BAD_INTS if not (arg == "offset" and v is None)]
        yield f"Buffer.{arg}", lambda v, arg=arg: memplan.Buffer(**{**buffer, arg: v}), bad
    yield "Buffer.name", lambda v: memplan.Buffer(**{**buffer, "name": v}), BAD_STRS
    yield "Problem.buffers", lambda v: memplan.Problem(v), [None, 1, NAN, [1], [None], "ab"]
    for arg in ("sizes", "starts", "ends", "alignments", "offsets"):
        bad = [v for v in BAD_INTS if not (arg == "offsets" and v is None)]
        yield (
            f"Problem.from_lists.{arg}",
            lambda v, arg=arg: memplan.Problem.from_lists(**{**lists, arg: [v]}),
            bad,
        )
        yield (
            f"Problem.from_lists.{arg}-not-a-list",
            lambda v, arg=arg: memplan.Problem.from_lists(**{**lists, arg: v}),
            [1, NAN, object()] + ([] if arg in ("alignments", "offsets") else [None]),
        )
    yield (
        "Problem.from_lists.names",
        lambda v: memplan.Problem.from_lists(**lists, names=[v]),
        BAD_STRS,
    )
    yield "Problem.from_csv.text", lambda v: memplan.Problem.from_csv(v), BAD_STRS
    yield (
        "Problem.from_csv.source",
        lambda v: memplan.Problem.from_csv("id,lower,upper,size\n", v),
        BAD_STRS,
    )
    yield "Problem.with_alignment", lambda v: three().with_alignment(v), BAD_INTS + [0]

    problem = three()
    yield "plan.problem", lambda v: memplan.plan(v), [None, 1, "p", [memplan.Buffer("a", 1, 0, 1)]]
    # None is the default planner.
    not_none_strs = [v for v in BAD_STRS if v is not None]
    yield "plan.planner", lambda v: memplan.plan(problem, v), not_none_strs + ["nope", ""]
    yield "plan.alignment", lambda v: memplan.plan(problem, alignment=v), BAD_INTS + [0]
    yield "plan.time_limit", lambda v: memplan.plan(problem, "search", time_limit=v), BAD_SECONDS
    yield "plan.seed", lambda v: memplan.plan(problem, "search", seed=v), BAD_INTS
    yield (
        "plan.threads",
        lambda v: memplan.plan(problem, "search", time_limit=0.1, threads=v),
        BAD_INTS + [1025, 2**40, 2**63],
    )
    optional_ints = [v for v in BAD_INTS if v is not None]
    yield "plan.metric", lambda v: memplan.plan(problem, "strip", metric=v), [1, 1.5, b"m", "?"]
    yield (
        "plan.max_iters",
        lambda v: memplan.plan(problem, "strip", max_iters=v),
        optional_ints + [2**32],
    )
    yield "plan.max_reads", lambda v: memplan.plan(problem, "strip", max_reads=v), optional_ints
    yield (
        "plan.return_on_interrupt",
        lambda v: memplan.plan(problem, "search", time_limit=0.1, return_on_interrupt=v),
        BAD_BOOLS,
    )

    yield "check.problem", lambda v: memplan.check(v, [0, 0, 0]), [None, 1, "p"]
    yield "check.plan", lambda v: memplan.check(problem, v), [None, 1, NAN, "abc", object()]
    yield "check.plan-offset", lambda v: memplan.check(problem, [0, 0, v]), BAD_INTS

    result = memplan.plan(problem)
    text = result.to_json(problem)
    yield "read_plan.text", lambda v: memplan.read_plan(v, problem), BAD_STRS
    yield "read_plan.problem", lambda v: memplan.read_plan(text, v), [None, 1, "p", result]
    yield "read_plan.source", lambda v: memplan.read_plan(text, problem, v), BAD_STRS
    yield "PlanResult.offset_of", lambda v: result.offset_of(v), BAD_STRS + ["nope"]
    yield "PlanResult.to_json", lambda v: result.to_json(v), [None, 1, "p", result]
    yield "PlanResult.to_csv", lambda v: result.to_csv(v), [None, 1, "p", result]

    paths = [None, 1, NAN, ["a"], object()]
    yield "load_onnx.path", lambda v: memplan.load_onnx(v), paths
    yield (
        "load_onnx.input_shapes",
        lambda v: memplan.load_onnx(ONNX, input_shapes={"x": [v, 3, 8, 8]}),
        BAD_INTS + [2**63],
    )
    yield (
        "load_onnx.input_shapes-not-a-mapping",
        lambda v: memplan.load_onnx(ONNX, input_shapes=v),
        [1, NAN, "x", [1, 2], {"x": 1}, {1: [1]}],
    )
    yield "load_onnx.dims", lambda v: memplan.load_onnx(ONNX, dims={"batch": v}), BAD_INTS + [2**63]
    yield (
        "load_onnx.dims-not-a-mapping",
        lambda v: memplan.load_onnx(ONNX, dims=v),
        [1, NAN, "batch", [1], {1: 1}],
    )
    yield "load_onnx.alias", lambda v: memplan.load_onnx(ONNX, alias=v), BAD_BOOLS
    yield "load_onnx.inplace", lambda v: memplan.load_onnx(ONNX, inplace=v), BAD_BOOLS
    yield "load_tflite.path", lambda v: memplan.load_tflite(v), paths
    yield "load_tflite.alias", lambda v: memplan.load_tflite(TFLITE, alias=v), BAD_BOOLS
    yield "load_tflite.inplace", lambda v: memplan.load_tflite(TFLITE, inplace=v), BAD_BOOLS
    yield "read_csv.path", lambda v: memplan.read_csv(v), paths

    table = {"size": [4], "start": [0], "end": [1], "alignment": [1]}
    for column in ("size", "start", "end", "alignment"):
        yield (
            f"from_table.{column}",
            lambda v, column=column: memplan.from_table({**table, column: [v]}),
            [NAN, INF, -INF, -1, 2**64, 2**70, "x", None, object()],
        )
    yield (
        "from_table.offset",
        lambda v: memplan.from_table({**table, "offset": [v]}),
        [INF, -INF, -1, 2**64, 2**70, "x", object()],
    )
    yield "from_table.table", lambda v: memplan.from_table(v), [None, 1, NAN, {}, []]


CASES = [(name, call, value) for name, call, values in cases() for value in values]


@pytest.mark.parametrize(
    "call,value", [(c, v) for _, c, v in CASES], ids=[f"{n}={v!r}"[:60] for n, _, v in CASES]
)
def test_bad_arguments_are_refused_without_a_panic(call, value):
    refused(lambda: call(value))


@pytest.mark.parametrize(
    "call,value,arg",
    [
        (lambda v: memplan.plan(three(), alignment=v), 0, "alignment"),
        (lambda v: three().with_alignment(v), 0, "alignment"),
        (lambda v: memplan.plan(three(), "search", time_limit=v), NAN, "time_limit"),
        (lambda v: memplan.plan(three(), "search", threads=v), 4096, "threads"),
        (lambda v: memplan.Buffer("a", v, 0, 1), -1, "size"),
        (lambda v: memplan.Buffer("a", 1, 0, 1, offset=v), 2**64, "offset"),
        (lambda v: memplan.plan(three(), "strip", max_iters=v), 2**32, "max_iters"),
        (lambda v: memplan.plan(three(), "search", seed=v), 1.5, "seed"),
        (lambda v: memplan.check(three(), [0, 0, v]), -1, "plan"),
        (lambda v: memplan.check(three(), v), None, "plan"),
        (lambda v: memplan.load_onnx(ONNX, dims={"batch": v}), -1, "dims"),
    ],
)
def test_argument_errors_name_the_argument(call, value, arg):
    error = refused(lambda: call(value), (ValueError, TypeError, OverflowError))
    assert arg in str(error)


@pytest.mark.parametrize("name", [name for name, _ in memplan.planners()])
def test_extreme_in_range_values_plan_or_fail_cleanly(name):
    top = 2**64 - 1
    problems = [
        memplan.Problem.from_lists([top, 1], [0, 0], [1, 1]),
        memplan.Problem.from_lists([top, top], [0, 1], [1, top]),
        memplan.Problem.from_lists([1, 1], [0, 0], [top, top], alignments=[2**63, 2**63]),
        memplan.Problem.from_lists([2**63, 1], [0, 0], [1, 1], offsets=[None, 2**63]),
        memplan.Problem.from_lists([5, 7, 3], [0, 0, 0], [2, 2, 2], alignments=[3, 7, top]),
    ]
    options = {"time_limit": 0.2} if name == "search" else {}
    for problem in problems:
        for alignment in (1, 2**63, top):
            result = clean(
                lambda p=problem, a=alignment: memplan.plan(p, name, alignment=a, **options)
            )
            if isinstance(result, memplan.PlanResult):
                assert memplan.check(problem, result) == []
    strip = three()
    for max_iters, max_reads in ((0, 0), (2**32 - 1, 2**64 - 1)):
        clean(lambda i=max_iters, r=max_reads: memplan.plan(strip, "strip", max_iters=i, max_reads=r))


def test_extreme_offsets_are_violations_not_panics():
    problem = three()
    violations = memplan.check(problem, [2**64 - 1, 0, 2**64 - 1])
    assert any(v.kind == "overflow" for v in violations)
    refused(lambda: memplan.read_plan("id,lower,upper,size,offset\na,0,2,1024,18446744073709551615\n", problem))


# The hostile-input suite's finds (scripts/hostile_run.py): read_csv read /dev/zero until
# memory ran out and a 10 GB sparse file up to its end; load_tflite read /dev/zero named
# .tflite up to 2 GiB; an exception message carried a name's raw ANSI escape.
ZERO = Path("/dev/zero")


@pytest.mark.skipif(not ZERO.exists(), reason="no /dev/zero here")
def test_endless_and_huge_files_are_refused_before_they_are_read(tmp_path):
    zero_csv = tmp_path / "zero.csv"
    zero_csv.symlink_to(ZERO)
    error = refused(lambda: memplan.read_csv(zero_csv), memplan.FormatError)
    assert "NUL byte at byte 0" in str(error)
    sparse = tmp_path / "sparse.csv"
    with open(sparse, "wb") as f:
        f.truncate(10 << 30)
    error = refused(lambda: memplan.read_csv(sparse), memplan.FormatError)
    assert "larger than" in str(error)
    zero_tflite = tmp_path / "zero.tflite"
    zero_tflite.symlink_to(ZERO)
    error = refused(lambda: memplan.load_tflite(zero_tflite), memplan.ModelError)
    assert "TFL3" in str(error)
    sparse_tflite = tmp_path / "sparse.tflite"
    sparse_tflite.symlink_to(sparse)
    error = refused(lambda: memplan.plan_file(sparse_tflite, "best-of"), memplan.MemplanError)
    assert "larger than" in str(error)


def test_read_csv_keeps_its_newlines_and_bom(tmp_path):
    path = tmp_path / "crlf.csv"
    path.write_bytes(b"\xef\xbb\xbfid,lower,upper,size\r\na,0,2,8\rb,1,3,8\n")
    assert memplan.read_csv(path).names == ["a", "b"]


def test_exception_messages_escape_control_characters(tmp_path):
    path = tmp_path / "names.json"
    path.write_text(
        '{"name": "g", "inputs": ["a"], "outputs": ["b"], "values": ['
        '{"name": "a", "dtype": "FLOAT", "shape": [4]},'
        '{"name": "b", "dtype": "FLOAT", "shape": [4]}], "nodes": ['
        '{"name": "n", "op": "Relu", "inputs": ["\\u001b[31mred"], "outputs": ["b"]}]}'
    )
    error = refused(lambda: memplan.plan_file(path, "best-of"))
    assert "\x1b" not in str(error), str(error)
    assert "\\u{1b}[31mred" in str(error), str(error)
