#!/usr/bin/env python3
"""A short, deterministic PyTorch CPU training loop for allocator benchmarks.

Trains one of two models with SGD on random data drawn from fixed seeds and
prints one JSON line per iteration::

    {"iter": i, "batch": B, "loss": L, "minflt": F, "seconds": S, "rss_kb": R,
     "cpu_seconds": C, "nivcsw": N}

``loss`` is the float loss (JSON floats are written with Python's ``repr``,
which round-trips exactly, so two runs can be compared bit for bit),
``minflt`` the minor page faults of the whole process (all threads) during
that iteration (``getrusage(RUSAGE_SELF).ru_minflt`` delta), ``seconds`` the
wall time of the iteration and ``rss_kb`` the resident set size (``VmRSS``
from ``/proc/self/status``) at its end, ``cpu_seconds`` the process's
user+system CPU time during it and ``nivcsw`` its involuntary context switches
(a sign that something else on the machine took the CPU: the timings of such
iterations are not about the allocator). An iteration covers drawing the batch,
forward, backward, the optimizer step and, when available,
``memplan.pool.step()``. The last line is::

    {"peak_rss_kb": ru_maxrss, "rss_start_kb": R0, "malloc_libs": [...],
     "preload_mapped": {...}, "memplan_pool": bool, ...}

where ``rss_start_kb`` is VmRSS just before the first iteration (imports and
model built: importing torch alone is several hundred MiB), ``malloc_libs`` lists the allocator libraries (tcmalloc, jemalloc,
mimalloc, memplan) mapped into the process and ``preload_mapped`` tells for
each ``LD_PRELOAD`` entry whether it is mapped, so a caller can check that the
preload really took effect (ld.so only warns when it cannot preload). When
``memplan.pool`` offers ``active()``/``summary()``, their results are added as
``memplan_pool_active``/``memplan_pool_summary``.

Models (random init, fixed seeds, no downloads):

* ``resnet18``: torchvision's resnet18, 1000 classes, 3x224x224 inputs;
* ``transformer``: a 4-layer ``nn.TransformerEncoder`` classifier (d_model 256,
  4 heads, feed-forward 1024, no dropout), token sequences of length 128 from
  a 1000-word vocabulary, mean-pooled, 10 classes.

Determinism: the weights come from ``torch.manual_seed(seed)``, the data for
iteration ``i`` from a generator seeded with ``seed * 1000003 + i`` (so it does
not depend on anything else the process did), the intra-op thread count is
fixed (``--threads``, default 2) and inter-op parallelism is set to 1,
``torch.use_deterministic_algorithms(True)`` is on and the models have no
dropout. The loss sequence then depends only on the command line (and the
machine's CPU/library versions), not on the allocator. Changing ``--threads``
changes the reduction order and therefore the low bits of the losses.

Usage::

    python train_step.py --model resnet18|transformer [--batch 8] [--iters 25]
        [--batch-change-at N --batch-after M] [--threads T] [--seed S]
"""

import argparse
import json
import os
import resource
import sys
import time


def rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def mapped_objects():
    """Paths of the shared objects mapped into this process."""
    paths = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].startswith("/"):
                    paths.add(parts[5].rstrip("\n"))
    except OSError:
        pass
    return paths


def allocator_report():
    """Which allocator libraries are mapped, and whether each LD_PRELOAD entry is.

    ld.so only prints a warning and carries on when it cannot preload an
    object, so a benchmark must check this instead of trusting the variable.
    """
    maps = mapped_objects()
    real = {os.path.realpath(p) for p in maps}
    keys = ("tcmalloc", "jemalloc", "mimalloc", "memplan")
    libs = sorted(p for p in maps
                  if os.path.basename(p).startswith("lib")
                  and any(k in os.path.basename(p) for k in keys))
    preload = {}
    for entry in os.environ.get("LD_PRELOAD", "").replace(":", " ").split():
        preload[entry] = os.path.realpath(entry) in real
    return {"malloc_libs": libs, "preload_mapped": preload}


def pool_report(mod):
    """memplan.pool's own view (active? counters) when the module offers it."""
    rep = {}
    if mod is None:
        return rep
    for key, fn in (("memplan_pool_active", "active"), ("memplan_pool_summary", "summary")):
        f = getattr(mod, fn, None)
        if f is not None:
            try:
                rep[key] = f()
            except Exception as e:  # report, do not fail the benchmark
                rep[key] = "error: %r" % (e,)
    return rep


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=("resnet18", "transformer"), required=True)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--iters", type=int, default=25)
    p.add_argument("--batch-change-at", type=int, default=None, metavar="N",
                   help="from iteration N on (0-based), use --batch-after")
    p.add_argument("--batch-after", type=int, default=None, metavar="M")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--no-pool", action="store_true",
                   help="do not call memplan.pool.step() even if it exists")
    a = p.parse_args(argv)
    if (a.batch_change_at is None) != (a.batch_after is None):
        p.error("--batch-change-at and --batch-after go together")
    return a


def main(argv=None):
    args = parse_args(argv)

    import torch
    import torch.nn as nn

    # Threads first: set_num_interop_threads must precede any parallel work.
    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    torch.use_deterministic_algorithms(True)

    pool_step = None
    pool_mod = None
    if not args.no_pool:
        try:
            import memplan.pool as _pool  # optional; present once memplan ships it
            pool_step = getattr(_pool, "step", None)
            pool_mod = _pool
        except ModuleNotFoundError as e:
            if e.name not in ("memplan", "memplan.pool"):
                raise  # memplan.pool exists but is broken: say so
            pool_step = None

    torch.manual_seed(args.seed)

    if args.model == "resnet18":
        import torchvision
        model = torchvision.models.resnet18(weights=None, num_classes=1000)
        n_classes = 1000

        def make_batch(gen, b):
            x = torch.randn(b, 3, 224, 224, generator=gen)
            y = torch.randint(0, n_classes, (b,), generator=gen)
            return x, y
    else:
        vocab, seq, d_model, n_classes = 1000, 128, 256, 10

        class EncoderClassifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(vocab, d_model)
                self.pos = nn.Parameter(torch.randn(1, seq, d_model) * 0.02)
                layer = nn.TransformerEncoderLayer(
                    d_model=d_model, nhead=4, dim_feedforward=1024, dropout=0.0,
                    activation="gelu", batch_first=True, norm_first=True)
                self.encoder = nn.TransformerEncoder(
                    layer, num_layers=4, enable_nested_tensor=False)
                self.norm = nn.LayerNorm(d_model)
                self.head = nn.Linear(d_model, n_classes)

            def forward(self, tokens):
                h = self.embed(tokens) + self.pos
                h = self.encoder(h)
                return self.head(self.norm(h).mean(dim=1))

        model = EncoderClassifier()

        def make_batch(gen, b):
            x = torch.randint(0, vocab, (b, seq), generator=gen)
            y = torch.randint(0, n_classes, (b,), generator=gen)
            return x, y

    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    out = sys.stdout
    rss_start = rss_kb()  # after imports and model construction, before training
    for i in range(args.iters):
        b = args.batch
        if args.batch_change_at is not None and i >= args.batch_change_at:
            b = args.batch_after
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()

        gen = torch.Generator().manual_seed(args.seed * 1000003 + i)
        x, y = make_batch(gen, b)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        loss_value = float(loss.item())
        del x, y, loss
        if pool_step is not None:
            pool_step()

        t1 = time.perf_counter()
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        out.write(json.dumps({"iter": i, "batch": b, "loss": loss_value,
                              "minflt": r1.ru_minflt - r0.ru_minflt,
                              "seconds": t1 - t0, "rss_kb": rss_kb(),
                              "cpu_seconds": cpu,
                              "nivcsw": r1.ru_nivcsw - r0.ru_nivcsw}) + "\n")
        out.flush()

    out.write(json.dumps({
        "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "rss_start_kb": rss_start,
        **allocator_report(),
        "memplan_pool": pool_step is not None,
        **pool_report(pool_mod),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
