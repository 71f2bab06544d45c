#!/usr/bin/env python3
"""Writes the PyTorch trace fixtures of memplan-swap's tests and fuzz seeds:
crates/memplan-swap/tests/data/torch/{small_cnn,small_transformer}.json, one training
step each of the small models python/tests/test_torch_swap.py trains, traced by
memplan.torch.trace. Times and machine speeds are this machine's; the tests assert only
what does not depend on them.

    python scripts/make_torch_fixtures.py
"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python" / "tests"))

import memplan.torch as mt  # noqa: E402
from test_torch_swap import small_cnn, small_transformer  # noqa: E402

OUT = ROOT / "crates" / "memplan-swap" / "tests" / "data" / "torch"


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, make in [("small_cnn", lambda: small_cnn(batch=2)), ("small_transformer", small_transformer)]:
        model, x, loss_fn = make()
        trace = mt.trace(model, x, loss_fn)
        trace.save(OUT / f"{name}.json")
        print(f"{name}: {trace}")


if __name__ == "__main__":
    main()
