#!/usr/bin/env python3
"""Writes a graph JSON (doc/graph-json.md) of a chain of N operators: x -> op1 -> ... -> opN.

Used to measure the exclusivity search and `npu` on long chains:
    python3 scripts/make_chain.py 100000 > /tmp/chain100k.json
    /usr/bin/time -v target/release/memplan plan /tmp/chain100k.json --planner exclusive -f json -o /dev/null
"""
import json
import sys


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
    values = [{"name": "x", "dtype": "UINT8", "bytes": 1024}]
    nodes = []
    prev = "x"
    for i in range(1, n + 1):
        name = f"t{i}"
        values.append({"name": name, "dtype": "UINT8", "bytes": 1024 + 64 * (i % 7)})
        nodes.append({"name": f"n{i}", "op": "Op", "inputs": [prev], "outputs": [name]})
        prev = name
    json.dump(
        {"name": f"chain{n}", "inputs": ["x"], "outputs": [prev], "values": values, "nodes": nodes},
        sys.stdout,
    )


if __name__ == "__main__":
    main()
