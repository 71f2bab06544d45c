#!/usr/bin/env python3
"""Writes the hostile-input corpus: for every input format memplan reads, files no reader
should ever panic, abort, hang or balloon on. Stdlib only; deterministic (fixed seed).

    python3 scripts/hostile_corpus.py OUT_DIR

The files come from the repository's small valid fixtures (truncated, bit-flipped, their
numbers replaced by extreme ones, their names by control characters, ...) and from a few
generators (deep JSON nesting, very long lines, duplicate ids, graph cycles, 10^4-row
inputs). OUT_DIR/<format>/ holds each format's files, with the extension memplan reads it
by; OUT_DIR/manifest.json lists them as {"format", "case", "path", "big"} records, `big`
marking the /dev/zero and 10 GB sparse-file cases (the runner holds those to 100 MB of
peak RSS). Nothing large is written: the 10 GB file is sparse and /dev/zero is a link.
See doc/testing.md ("The hostile-input suite").
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED = 45  # issue #45

# The problem the plan JSON and solution CSV seeds solve (memplan::fuzzing's fixed one).
PLAN_PROBLEM = "id,lower,upper,size,alignment\na,0,2,16,8\nb,1,3,8,\nc,2,4,24,\nd,3,5,0,\n"

# format -> (file suffix, seed fixtures relative to the repository root, kind)
FORMATS = {
    "minimalloc_csv": (".csv", ["examples/small.csv", "crates/memplan/tests/data/all_columns.csv"], "text"),
    "memops_csv": (".csv", ["examples/memops.csv"], "text"),
    "pool_trace_csv": (".csv", ["examples/pool_trace.csv"], "text"),
    "pool_trace_bin": (".bin", ["fuzz/seeds/traces/periodic.bin"], "bin"),
    "graph_json": (".json", ["examples/small_cnn.json", "crates/memplan-graph/tests/data/inplace.json"], "json"),
    "onnx": (".onnx", ["crates/memplan-onnx/tests/data/small.onnx"], "bin"),
    "tflite": (".tflite", ["crates/memplan-tflite/tests/data/branchy.tflite"], "bin"),
    "plan_json": (".json", ["fuzz/seeds/plan_files/plan.json"], "json"),
    "solution_csv": (".csv", ["fuzz/seeds/plan_files/solution.csv"], "text"),
    "pool_plan_json": (".json", ["fuzz/seeds/pool_plan/pool_trace.json"], "json"),
    "platform_json": (".json", ["platforms/default-npu.json"], "json"),
    "pipedream": (".graph.txt", ["crates/memplan-swap/tests/data/tiny.graph.txt"], "text"),
    "torch_trace": (".json", ["crates/memplan-swap/tests/data/torch/tiny.json"], "json"),
}

HUGE_NUMBERS = {
    "2pow64": "18446744073709551616",
    "u64max": "18446744073709551615",
    "1e300": "1e300",
    "minus1": "-1",
    "nan": "NaN",
    "inf": "inf",
    "long_digits": "9" * 400,
    "float": "0.5",
}
# Names no terminal should receive raw: ANSI escapes, BEL, CR, backspace, a right-to-left
# override (a NUL has its own case).
HOSTILE_NAME = "\x1b[31mred\x1b[0m\x07\r\x08\u202eevil"

SPARSE_BYTES = 10 * 1024**3


class Corpus:
    def __init__(self, out: Path):
        self.out = out
        self.records: list[dict] = []

    def add(self, fmt: str, case: str, data: bytes | None = None, *, link: str | None = None,
            sparse: int | None = None) -> None:
        suffix = FORMATS[fmt][0]
        folder = self.out / fmt
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{case}{suffix}"
        if path.is_symlink() or path.exists():
            path.unlink()
        big = False
        if link is not None:
            os.symlink(link, path)
            big = True
        elif sparse is not None:
            with open(path, "wb") as f:
                f.truncate(sparse)
            big = True
        else:
            path.write_bytes(data if data is not None else b"")
        self.records.append({"format": fmt, "case": case, "path": str(path.relative_to(self.out)),
                             "big": big})


def numbers_replaced(text: str, value: str, rng: random.Random, every: bool) -> str:
    """`text` with its integers replaced by `value`: all of them, or about a third."""
    def sub(match: re.Match) -> str:
        return value if every or rng.random() < 0.34 else match.group(0)
    return re.sub(r"(?<![A-Za-z_.\d])\d+(?![A-Za-z_\d])", sub, text)


def generic(c: Corpus, fmt: str, seed: bytes, rng: random.Random) -> None:
    """The cases every format gets."""
    c.add(fmt, "empty", b"")
    c.add(fmt, "nul", b"\0")
    c.add(fmt, "whitespace", b" \n\t\r\n")
    c.add(fmt, "random_bytes", bytes(rng.getrandbits(8) for _ in range(4096)))
    c.add(fmt, "bom_only", b"\xef\xbb\xbf")
    c.add(fmt, "bom_seed", b"\xef\xbb\xbf" + seed)
    c.add(fmt, "utf16_seed", b"\xff\xfe" + seed.decode("latin-1").encode("utf-16-le"))
    c.add(fmt, "seed", seed)
    for frac in (1, 4, 2, 3):
        cut = {1: 1, 4: len(seed) // 4, 2: len(seed) // 2, 3: 3 * len(seed) // 4}[frac]
        c.add(fmt, f"truncated_{cut}", seed[:cut])
    c.add(fmt, "truncated_last", seed[:-1])
    for k in range(4):
        mutant = bytearray(seed)
        for _ in range(1 + k * 3):
            mutant[rng.randrange(len(mutant))] = rng.getrandbits(8)
        c.add(fmt, f"bitflip_{k}", bytes(mutant))
    c.add(fmt, "seed_twice", seed + seed)
    c.add(fmt, "seed_then_garbage", seed + b"\0\xff\xfe garbage \x1b[2J")
    c.add(fmt, "long_line", b"a" * (1 << 20))
    c.add(fmt, "sparse_10g", sparse=SPARSE_BYTES)
    c.add(fmt, "dev_zero", link="/dev/zero")


def text_cases(c: Corpus, fmt: str, seed: bytes, rng: random.Random) -> None:
    text = seed.decode("utf-8")
    for name, value in HUGE_NUMBERS.items():
        c.add(fmt, f"numbers_{name}", numbers_replaced(text, value, rng, every=True).encode())
        c.add(fmt, f"some_numbers_{name}", numbers_replaced(text, value, rng, every=False).encode())
    lines = text.splitlines()
    c.add(fmt, "crlf", "\r\n".join(lines).encode())
    c.add(fmt, "cr_only", "\r".join(lines).encode())
    c.add(fmt, "header_only", (lines[0] + "\n").encode())
    if len(lines) > 1:
        c.add(fmt, "duplicate_rows", "\n".join(lines + lines[1:]).encode() + b"\n")
        c.add(fmt, "rows_reversed", "\n".join([lines[0]] + lines[1:][::-1]).encode() + b"\n")
        c.add(fmt, "extra_column", "\n".join(line + ",x" for line in lines).encode() + b"\n")
        c.add(fmt, "missing_column",
              "\n".join(line.rsplit(",", 1)[0] if "," in line else line for line in lines).encode())
        c.add(fmt, "empty_fields", "\n".join(re.sub(r"[^,\t]+", "", line) for line in lines[1:]).encode())
        # Names with ANSI escapes, BEL, CR, NUL: swap the first field of every row.
        named = [lines[0]] + [HOSTILE_NAME + str(i) + line[len(line.split(",")[0]):] if "," in line
                              else HOSTILE_NAME + line for i, line in enumerate(lines[1:])]
        c.add(fmt, "control_names", "\n".join(named).encode())
        c.add(fmt, "long_name", "\n".join([lines[0]] + ["n" * 1_000_000 + lines[1][len(lines[1].split(",")[0]):]]
                                          + lines[2:]).encode())
        # A line of 10^6 commas (10^6 empty columns).
        c.add(fmt, "million_commas", (lines[0] + "\n" + "," * 1_000_000 + "\n").encode())
        c.add(fmt, "quoted", "\n".join('"' + line.replace(",", '","') + '"' for line in lines).encode())
        c.add(fmt, "unterminated_quote", (text + '\n"').encode())
    c.add(fmt, "header_repeated", (lines[0] + "\n") .encode() * 1000)


def json_cases(c: Corpus, fmt: str, seed: bytes, rng: random.Random) -> None:
    text = seed.decode("utf-8")
    depth = 100_000
    c.add(fmt, "deep_arrays", b"[" * depth + b"]" * depth)
    c.add(fmt, "deep_arrays_open", b"[" * depth)
    c.add(fmt, "deep_objects", b'{"a":' * depth + b"1" + b"}" * depth)
    obj = json.loads(text)
    key = next(iter(obj)) if isinstance(obj, dict) and obj else "a"
    c.add(fmt, "deep_under_key", ('{"' + key + '":').encode() + b"[" * depth + b"]" * depth + b"}")
    for name, top in (("array", "[]"), ("null", "null"), ("number", "1"), ("string", '"x"'),
                      ("bool", "true"), ("empty_object", "{}"), ("array_of_object", "[{}]")):
        c.add(fmt, "top_" + name, top.encode())
    for name, value in HUGE_NUMBERS.items():
        c.add(fmt, f"numbers_{name}", numbers_replaced(text, value, rng, every=True).encode())
        c.add(fmt, f"some_numbers_{name}", numbers_replaced(text, value, rng, every=False).encode())
    c.add(fmt, "strings_as_numbers", re.sub(r"(?<=: )(\d+)", r'"\1"', text).encode())
    c.add(fmt, "control_names", re.sub(r'"([A-Za-z_][\w.]*)"(?=\s*[,\]}])',
                                       lambda m: json.dumps(HOSTILE_NAME + m.group(1)), text).encode())
    c.add(fmt, "long_string_values", re.sub(r'"([A-Za-z_][\w.]*)"(?=\s*[,\]}])',
                                            lambda m: '"' + "s" * 200_000 + '"', text, count=1).encode())
    c.add(fmt, "duplicate_keys", re.sub(r"^\{", "{" + text.strip()[1:-1] + ",", text.strip()).encode())
    c.add(fmt, "lone_surrogate", text.replace('"', '"\\ud800', 1).encode())
    c.add(fmt, "nul_in_string", text.replace('"', '"\\u0000', 1).encode())
    c.add(fmt, "trailing_comma", re.sub(r"\}\s*$", ",}", text).encode())
    c.add(fmt, "comment", ("// hi\n" + text).encode())
    # Every list in the seed doubled: duplicate ids, nodes, buffers, blocks, ops.
    c.add(fmt, "lists_doubled", json.dumps(doubled(obj)).encode())
    c.add(fmt, "lists_emptied", json.dumps(emptied(obj)).encode())
    c.add(fmt, "values_nulled", json.dumps(nulled(obj)).encode())


def doubled(value):
    if isinstance(value, list):
        items = [doubled(v) for v in value]
        return items + items
    if isinstance(value, dict):
        return {k: doubled(v) for k, v in value.items()}
    return value


def emptied(value):
    if isinstance(value, list):
        return []
    if isinstance(value, dict):
        return {k: emptied(v) for k, v in value.items()}
    return value


def nulled(value):
    if isinstance(value, dict):
        return {k: (nulled(v) if isinstance(v, (dict, list)) else None) for k, v in value.items()}
    if isinstance(value, list):
        return [nulled(v) for v in value]
    return value


def bin_cases(c: Corpus, fmt: str, seed: bytes, rng: random.Random) -> None:
    """Lengths and counts far above the bytes that remain: 32-bit words overwritten with
    huge values at aligned offsets, varint lengths of 2^62 spliced in (protobuf)."""
    for k in range(12):
        mutant = bytearray(seed)
        at = rng.randrange(0, max(1, len(seed) - 4)) & ~3
        mutant[at:at + 4] = rng.choice([b"\xff\xff\xff\xff", b"\xff\xff\xff\x7f", b"\x00\x00\x00\x80",
                                        b"\xf0\xff\xff\x0f"])
        c.add(fmt, f"huge_word_{k}", bytes(mutant))
    for k in range(4):
        mutant = bytearray(seed)
        at = rng.randrange(0, max(1, len(seed) - 8)) & ~7
        mutant[at:at + 8] = b"\xff" * 8
        c.add(fmt, f"huge_u64_{k}", bytes(mutant))
    huge_varint = b"\xff" * 9 + b"\x01"
    for field in (1, 7, 8):
        tag = bytes([(field << 3) | 2])
        c.add(fmt, f"varint_len_field{field}", tag + huge_varint + b"\x00" * 16)
        c.add(fmt, f"varint_len_field{field}_after_seed", seed + tag + huge_varint)
    # 2^62 as a varint (a length no file reaches without overflow when added to a position).
    c.add(fmt, "varint_2pow62", b"\x0a" + b"\x80" * 8 + b"\x40" + b"x" * 32)
    c.add(fmt, "zero_words", bytes(len(seed)))
    c.add(fmt, "ff_words", b"\xff" * len(seed))
    c.add(fmt, "misaligned_tail", seed + b"\x01\x02\x03")


def graph_cases(c: Corpus, rng: random.Random) -> None:
    """Graph JSON: cycles, a self-loop, a dangling input, and a 10^4-node chain."""
    def graph(nodes, values, inputs=("a",), outputs=("b",)):
        return json.dumps({"name": "hostile", "inputs": list(inputs), "outputs": list(outputs),
                           "values": values, "nodes": nodes}).encode()
    values = [{"name": n, "dtype": "FLOAT", "shape": [4]} for n in "abc"]
    c.add("graph_json", "cycle", graph(
        [{"name": "n1", "op": "Relu", "inputs": ["c"], "outputs": ["b"]},
         {"name": "n2", "op": "Relu", "inputs": ["b"], "outputs": ["c"]}], values))
    c.add("graph_json", "self_loop", graph(
        [{"name": "n1", "op": "Relu", "inputs": ["b"], "outputs": ["b"]}], values))
    c.add("graph_json", "two_producers", graph(
        [{"name": "n1", "op": "Relu", "inputs": ["a"], "outputs": ["b"]},
         {"name": "n2", "op": "Relu", "inputs": ["a"], "outputs": ["b"]}], values))
    c.add("graph_json", "duplicate_values", graph(
        [{"name": "n1", "op": "Relu", "inputs": ["a"], "outputs": ["b"]}], values + values))
    for name in ("cycle.json", "dangling.json", "read_before_produce.json", "views.json",
                 "control_edges.json"):
        c.add("graph_json", "fixture_" + name[:-5], (ROOT / "crates/memplan-graph/tests/data" / name).read_bytes())
    n = 10_000
    values = [{"name": f"t{i}", "dtype": "FLOAT", "shape": [rng.randrange(1, 64), 16]} for i in range(n + 1)]
    nodes = [{"name": f"n{i}", "op": "Relu", "inputs": [f"t{i}"], "outputs": [f"t{i + 1}"]} for i in range(n)]
    c.add("graph_json", "chain_10k", graph(nodes, values, ["t0"], [f"t{n}"]))
    c.add("graph_json", "shape_huge_dims", graph(
        [{"name": "n1", "op": "Relu", "inputs": ["a"], "outputs": ["b"]}],
        [{"name": "a", "dtype": "FLOAT", "shape": [2**32, 2**32, 2**32]},
         {"name": "b", "dtype": "DOUBLE", "shape": [2**63]}]))
    c.add("graph_json", "shape_negative", graph(
        [{"name": "n1", "op": "Relu", "inputs": ["a"], "outputs": ["b"]}],
        [{"name": "a", "dtype": "FLOAT", "shape": [-1, 3]}, {"name": "b", "dtype": "FLOAT", "shape": [3]}]))


def many_rows(c: Corpus, rng: random.Random) -> None:
    """10^4-tensor inputs (robustness, not speed)."""
    n = 10_000
    rows = ["id,lower,upper,size"] + [f"b{i},{i},{i + rng.randrange(1, 50)},{rng.randrange(1, 1 << 20)}"
                                      for i in range(n)]
    c.add("minimalloc_csv", "rows_10k", ("\n".join(rows) + "\n").encode())
    ops = ["op,tensor,size"]
    for i in range(n):
        ops.append(f"alloc,t{i},{rng.randrange(1, 1 << 16)}")
        if i >= 8:
            ops.append(f"free,t{i - 8},")
    c.add("memops_csv", "ops_10k", ("\n".join(ops) + "\n").encode())
    trace = ["seq,iter,op,size,id,align"]
    seq = 0
    for it in range(2):
        for i in range(2_500):
            trace.append(f"{seq},{it},alloc,{(i % 97 + 1) * 64},{i},64")
            seq += 1
        for i in range(2_500):
            trace.append(f"{seq},{it},free,{(i % 97 + 1) * 64},{i},64")
            seq += 1
    c.add("pool_trace_csv", "trace_10k", ("\n".join(trace) + "\n").encode())
    # Frees of ids never allocated, a double free, an id reused while live.
    c.add("pool_trace_csv", "foreign_free", b"seq,iter,op,size,id,align\n0,0,free,64,7,64\n")
    c.add("pool_trace_csv", "double_free",
          b"seq,iter,op,size,id,align\n0,0,alloc,64,1,64\n1,0,free,64,1,64\n2,0,free,64,1,64\n")
    c.add("memops_csv", "double_alloc", b"op,tensor,size\nalloc,a,8\nalloc,a,8\nfree,a,\n")
    c.add("memops_csv", "free_unknown", b"op,tensor,size\nfree,zz,\n")


def pipedream_cases(c: Corpus) -> None:
    c.add("pipedream", "cycle",
          b"node1 -- Input -- forward_compute_time=1.0, backward_compute_time=0.0, activation_size=8.0, parameter_size=0.0\n"
          b"node2 -- ReLU -- forward_compute_time=1.0, backward_compute_time=1.0, activation_size=8.0, parameter_size=0.0\n"
          b"\tnode1 -- node2\n\tnode2 -- node1\n")
    c.add("pipedream", "edge_to_nowhere",
          b"node1 -- Input -- forward_compute_time=1.0, backward_compute_time=0.0, activation_size=8.0, parameter_size=0.0\n"
          b"\tnode1 -- node9\n")
    layers = [f"node{i} -- ReLU -- forward_compute_time=1.0, backward_compute_time=1.0, activation_size=64.0, parameter_size=0.0"
              for i in range(1, 5_001)]
    edges = [f"\tnode{i} -- node{i + 1}" for i in range(1, 5_000)]
    # 5,000 layers: a training step of about 10^4 tensors (forward and backward).
    c.add("pipedream", "chain_5k", ("\n".join(layers + edges) + "\n").encode())


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: python3 scripts/hostile_corpus.py OUT_DIR", file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(SEED)
    c = Corpus(out)
    for fmt, (_, seeds, kind) in FORMATS.items():
        seed = (ROOT / seeds[0]).read_bytes()
        generic(c, fmt, seed, rng)
        for extra, path in enumerate(seeds[1:], 1):
            c.add(fmt, f"seed{extra}", (ROOT / path).read_bytes())
        if kind == "text":
            text_cases(c, fmt, seed, rng)
        elif kind == "json":
            json_cases(c, fmt, seed, rng)
        if kind == "bin" or fmt in ("onnx", "tflite"):
            bin_cases(c, fmt, seed, rng)
    graph_cases(c, rng)
    many_rows(c, rng)
    pipedream_cases(c)
    (out / "plan_problem.csv").write_text(PLAN_PROBLEM)
    (out / "manifest.json").write_text(json.dumps(c.records, indent=1) + "\n")
    print(f"{len(c.records)} files in {out} ({len(FORMATS)} formats)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
