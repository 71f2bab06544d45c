#!/usr/bin/env python3
"""Planning time of `.tflite` models against their size: time vs n and the growth exponent.

Writes two shapes of int8 model with n operators (flatbuffers through the schema module of
the `tflite-micro` pip package, no converter):

* `chain`: a chain of RELU operators, each output read by the next (n + 1 tensors);
* `ladder`: every operator ADDs the two previous outputs, so each output lives for two
  operators and the in-place sharing of ADD applies.

and times, for n = 10^3, 10^4, 10^5, `memplan plan` with `tflm-greedy`, `best-of` and the
default planner (search, one second at most, on top of best-of), `--no-inplace` with
best-of, and `memplan inspect`. It prints seconds per case and the log-log slope from the
smallest to the largest n (1 = linear, 2 = quadratic). Issue #45 measured 1.4 s at 10^4
and 221 s at 10^5 before the indexed TFLM walk.

    cargo build --release -p memplan-cli
    python3 scripts/bench_tflite_scale.py [--binary target/release/memplan] [--sizes 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import flatbuffers
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as tfl

ROOT = Path(__file__).resolve().parent.parent


def tensor(name, shape, buffer):
    t = tfl.TensorT()
    t.name = name
    t.shape = shape
    t.type = tfl.TensorType.INT8
    t.buffer = buffer
    q = tfl.QuantizationParametersT()
    q.scale = [0.05]
    q.zeroPoint = [0]
    t.quantization = q
    return t


def model(shape_name, n, width=64):
    m = tfl.ModelT()
    m.version = 3
    m.buffers = [tfl.BufferT()]
    code = tfl.OperatorCodeT()
    op_code = tfl.BuiltinOperator.RELU if shape_name == "chain" else tfl.BuiltinOperator.ADD
    code.builtinCode = op_code
    code.deprecatedBuiltinCode = op_code
    code.version = 1
    m.operatorCodes = [code]
    sg = tfl.SubGraphT()
    sg.tensors = []
    sg.operators = []
    shape = [1, width]
    inputs = 1 if shape_name == "chain" else 2
    for i in range(n + inputs):
        m.buffers.append(tfl.BufferT())
        sg.tensors.append(tensor(f"t{i}", shape, len(m.buffers) - 1))
    for k in range(n):
        op = tfl.OperatorT()
        op.opcodeIndex = 0
        if shape_name == "chain":
            op.inputs = [k]
            op.outputs = [k + 1]
        else:
            op.inputs = [k, k + 1]
            op.outputs = [k + 2]
            op.builtinOptionsType = tfl.BuiltinOptions.AddOptions
            op.builtinOptions = tfl.AddOptionsT()
        sg.operators.append(op)
    sg.inputs = list(range(inputs))
    sg.outputs = [n + inputs - 1]
    m.subgraphs = [sg]
    builder = flatbuffers.Builder(1 << 20)
    builder.Finish(m.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


CASES = [
    ("plan tflm-greedy", ["plan", "{m}", "--planner", "tflm-greedy", "-f", "json"]),
    ("plan best-of", ["plan", "{m}", "--planner", "best-of", "-f", "json"]),
    ("plan (default)", ["plan", "{m}", "-f", "json"]),
    ("plan best-of --no-inplace", ["plan", "{m}", "--planner", "best-of", "--no-inplace", "-f", "json"]),
    ("inspect", ["inspect", "{m}", "-f", "json"]),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=str(ROOT / "target/release/memplan"))
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if not Path(args.binary).exists():
        sys.exit(f"{args.binary} not found: cargo build --release -p memplan-cli")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for shape in ("chain", "ladder"):
            for n in sizes:
                path = Path(tmp) / f"{shape}-{n}.tflite"
                path.write_bytes(model(shape, n))
                for label, argv in CASES:
                    cmd = [args.binary] + [a.format(m=path) for a in argv]
                    start = time.perf_counter()
                    try:
                        done = subprocess.run(cmd, capture_output=True, timeout=args.timeout)
                        seconds = time.perf_counter() - start
                        if done.returncode != 0:
                            sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr.decode()}")
                    except subprocess.TimeoutExpired:
                        seconds = math.inf
                    results[(shape, label, n)] = seconds
                    print(f"{shape:7} n={n:>7} {label:28} {seconds:8.2f} s", flush=True)
    print()
    print(f"| model | case | " + " | ".join(f"n={n:,}" for n in sizes) + " | exponent |")
    print("|---|---|" + "---:|" * (len(sizes) + 1))
    for shape in ("chain", "ladder"):
        for label, _ in CASES:
            times = [results[(shape, label, n)] for n in sizes]
            a, b = times[0], times[-1]
            slope = (
                math.log(b / a) / math.log(sizes[-1] / sizes[0])
                if math.isfinite(b) and a > 0
                else math.inf
            )
            cells = " | ".join(f"{t:.2f} s" for t in times)
            print(f"| {shape} | {label} | {cells} | {slope:.2f} |")


if __name__ == "__main__":
    main()
