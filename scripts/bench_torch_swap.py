#!/usr/bin/env python3
"""The swap method in real PyTorch training, against PyTorch's own tools (issue #38).

Trains resnet18 (batch 8, 160x160) and 6 x TransformerEncoderLayer(256, 4, 1024) (seq 512,
batch 4) for --steps measured steps per row, after one warm-up step, under:

- plain;
- ``torch.autograd.graph.save_on_cpu`` (PyTorch's offloading; on a CPU it has nothing to
  move to);
- per-block checkpointing (``torch.utils.checkpoint``, one checkpoint per residual block or
  encoder layer);
- memplan plans (``memplan.torch``): budgets as fractions of the traced peak, with the
  store (a file), fp16/bf16 in memory, fp16/int8 compressed into the store, and delete
  and recompute; and one plan whose budget is per-block checkpointing's measured peak.

Per row: the measured tensor peak (memplan's counting CPU allocator, or
``torch.cuda.max_memory_allocated``, above the step's start; the largest of the steps),
the rise of the RSS high-water over the step's start (``/proc/self/clear_refs`` then
``VmHWM`` minus ``VmRSS`` at the start; glibc's mmap threshold is set low so freed tensors
leave RSS; CPU only), memplan's predicted peak and
its ratio to the measured one, the step time as a ratio to plain (each measured step
paired with a plain step just before it; the median of the pairs' ratios),
and the gradient error against plain (the largest relative L2 error of a parameter's
gradient, over gradients at least 1e-3 of the largest).

    python scripts/bench_torch_swap.py                 # both models, CPU
    python scripts/bench_torch_swap.py --small         # the small models of the CI test
    python scripts/bench_torch_swap.py --device cuda   # on a GPU (CUDA events for time)

Dropout is off so that every row computes the same gradients as plain. By default the
gradients are set to None before each step (PyTorch's default), so the step allocates
them; ``--keep-grads`` keeps the buffers from step to step instead.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time

if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
    os.environ["MALLOC_MMAP_THRESHOLD_"] = "131072"
    os.execv(sys.executable, [sys.executable] + sys.argv)

import torch  # noqa: E402
import torch.utils.checkpoint as cp  # noqa: E402

import memplan.torch as mt  # noqa: E402
from memplan.torch._counting import module as counter  # noqa: E402


def resnet18(device):
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18().to(device)
    x = torch.randn(8, 3, 160, 160, device=device)
    y = torch.randint(0, 1000, (8,), device=device)

    def loss_fn(out):
        return torch.nn.functional.cross_entropy(out, y)

    def blocks():
        return [model.layer1, model.layer2, model.layer3, model.layer4]

    def checkpointed(inp):
        m = model
        h = m.maxpool(m.relu(m.bn1(m.conv1(inp))))
        for layer in blocks():
            for block in layer:
                h = cp.checkpoint(block, h, use_reentrant=False)
        return m.fc(torch.flatten(m.avgpool(h), 1))

    return "resnet18 b8 160x160", model, x, loss_fn, checkpointed


def transformer(device, layers=6, d=256, heads=4, ff=1024, seq=512, batch=4):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        *[
            torch.nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True)
            for _ in range(layers)
        ]
    ).to(device)
    x = torch.randn(batch, seq, d, device=device)
    # A regression target: every layer's parameters get a gradient (the mean square of
    # a layer-normed output alone is nearly constant, which would hide errors).
    y = torch.randn(batch, seq, d, device=device)

    def loss_fn(out):
        return torch.nn.functional.mse_loss(out, y)

    def checkpointed(inp):
        h = inp
        for layer in model:
            h = cp.checkpoint(layer, h, use_reentrant=False)
        return h

    name = f"{layers} x TransformerEncoderLayer({d}, {heads}, {ff}) seq {seq} b{batch}"
    return name, model, x, loss_fn, checkpointed


def small_cnn(device):
    torch.manual_seed(0)
    c = 32
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, c, 3, padding=1), torch.nn.BatchNorm2d(c), torch.nn.ReLU(),
        torch.nn.Conv2d(c, c, 3, padding=1), torch.nn.BatchNorm2d(c), torch.nn.ReLU(),
        torch.nn.Conv2d(c, c, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(c, 10),
    ).to(device)
    x = torch.randn(8, 3, 64, 64, device=device)
    y = torch.randint(0, 10, (8,), device=device)

    def loss_fn(out):
        return torch.nn.functional.cross_entropy(out, y)

    def checkpointed(inp):
        h = cp.checkpoint(model[:3], inp, use_reentrant=False)
        h = cp.checkpoint(model[3:6], h, use_reentrant=False)
        return model[6:](h)

    return "small CNN b8 64x64", model, x, loss_fn, checkpointed


class Meter:
    """Tensor peak, RSS high-water and time of one step."""

    def __init__(self, device):
        self.device = torch.device(device)

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated()
            self.start = torch.cuda.Event(enable_timing=True)
            self.end = torch.cuda.Event(enable_timing=True)
            self.start.record()
        else:
            self.counter = counter()
            self.base = self.counter.live()
            self.counter.reset_peak()
            try:
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")
            except OSError:
                pass
            self.rss0 = _status("VmRSS:")
            self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        if self.device.type == "cuda":
            self.end.record()
            torch.cuda.synchronize()
            self.ms = self.start.elapsed_time(self.end)
            self.peak = torch.cuda.max_memory_allocated() - self.base
            self.rss = None
        else:
            self.ms = (time.perf_counter() - self.t0) * 1e3
            self.peak = self.counter.peak() - self.base
            hwm = _status("VmHWM:")
            self.rss = None if hwm is None or self.rss0 is None else hwm - self.rss0
        return False


def _status(key):
    """A /proc/self/status field in bytes (None where there is none)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def grads(model):
    return [p.grad.detach().float().cpu().clone() for p in model.parameters()]


def grad_error(g, g0):
    """The largest relative L2 error of a parameter's gradient, over the parameters whose
    gradient is not negligible (norm at least 1e-3 of the largest one: a convolution's
    bias before a batch norm has a gradient that is zero up to rounding, where a relative
    error means nothing). One norm over all gradients would hide a wrong small gradient
    behind a large one."""
    norms = [float(b.norm()) for b in g0]
    floor = 1e-3 * max(norms)
    worst = 0.0
    for a, b, n in zip(g, g0, norms):
        if n > 0 and n >= floor:
            worst = max(worst, float((a - b).norm()) / n)
    return worst


KEEP_GRADS = False
SAVE_TRACES = None


def run_row(model, x, loss_fn, step_fn, steps, device, plain_fn=None):
    """`steps` measured steps of `step_fn` after a warm-up one: the largest tensor peak
    and RSS rise, the median time, the last gradients. With `plain_fn`, each measured
    step is paired with a plain step run just before it and the time is the median of
    the pairs' ratios (this machine is shared: pairing cancels its slow phases)."""
    peaks, rss, times, g = [], [], [], None
    for i in range(steps + 1):
        plain_ms = None
        if plain_fn is not None and i > 0:
            model.zero_grad(set_to_none=not KEEP_GRADS)
            with Meter(device) as m:
                plain_fn()
            plain_ms = m.ms
        model.zero_grad(set_to_none=not KEEP_GRADS)
        with Meter(device) as m:
            step_fn()
        if i == 0:
            continue  # warm-up
        peaks.append(m.peak)
        rss.append(m.rss)
        times.append(m.ms / plain_ms if plain_ms else m.ms)
        g = grads(model)
    return max(peaks), (max(r for r in rss) if rss[0] is not None else None), statistics.median(times), g


def bench(model_fn, steps, device, budgets, variants, out_rows):
    name, model, x, loss_fn, checkpointed = model_fn(device)
    if KEEP_GRADS:
        # Gradient buffers made before the step and reused (zero_grad(set_to_none=False)).
        loss_fn(model(x)).backward()
        model.zero_grad(set_to_none=False)
        name += ", gradient buffers kept"
    print(f"\n## {name}\n", flush=True)
    t = time.perf_counter()
    trace = mt.trace(model, x, loss_fn)
    trace_s = time.perf_counter() - t
    if SAVE_TRACES:
        os.makedirs(SAVE_TRACES, exist_ok=True)
        slug = re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_")[:80]
        path = os.path.join(SAVE_TRACES, slug + ".json")
        trace.save(path)  # replayable: memplan swap PATH, or memplan.torch.Trace.load
        print(f"(trace saved to {path})")

    def plain():
        loss_fn(model(x)).backward()

    rows = []
    base_peak, base_rss, base_ms, g0 = run_row(model, x, loss_fn, plain, steps, device)

    def add(label, peak, rss, ratio, g, predicted=None, extra=""):
        err = grad_error(g, g0) if g is not None else float("nan")
        flat = lambda gs: torch.cat([t.reshape(-1) for t in gs])  # noqa: E731
        err_all = float((flat(g) - flat(g0)).norm() / flat(g0).norm())
        row = {
            "model": name,
            "row": label,
            "peak_bytes": peak,
            "peak_ratio": peak / base_peak,
            "rss_bytes": rss,
            "predicted_bytes": predicted,
            "predicted_over_measured": None if predicted is None else predicted / peak,
            "step_ratio": ratio,
            "grad_error": err,
            "grad_error_all": err_all,
            "note": extra,
        }
        rows.append(row)
        out_rows.append(row)
        mb = lambda b: "-" if b is None else f"{b / 1e6:.1f}"  # noqa: E731
        pred = "-" if predicted is None else f"{mb(predicted)} ({predicted / peak:.3f})"
        print(
            f"| {label} | {mb(peak)} | {peak / base_peak:.3f} | {mb(rss)} | {pred} | "
            f"{ratio:.2f} | {err:.1e} | {err_all:.1e} | {extra} |",
            flush=True,
        )

    print(
        "| row | tensor peak MB | × plain | RSS high-water rise MB | predicted MB (÷ measured) "
        "| step × plain | grad error (worst param) | grad error (all) | plan |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    add("plain", base_peak, base_rss, 1.0, g0)

    def offload():
        with torch.autograd.graph.save_on_cpu(pin_memory=device != "cpu"):
            loss_fn(model(x)).backward()

    add("save_on_cpu", *run_row(model, x, loss_fn, offload, steps, device, plain))

    def ckpt():
        loss_fn(checkpointed(x)).backward()

    ck = run_row(model, x, loss_fn, ckpt, steps, device, plain)
    add("per-block checkpointing", *ck)

    def memplan_row(label, plan):
        def step():
            with mt.apply(plan) as rt:
                loss_fn(model(x)).backward()
            if rt.diverged:
                raise RuntimeError(f"{label}: the step differed from the trace: {rt.diverged}")

        t = time.perf_counter()
        res = run_row(model, x, loss_fn, step, steps, device, plain)
        del t
        budget = plan.data["budget_bytes"]
        in_run = "met in the run" if res[0] <= budget else "exceeded in the run"
        note = (
            f"budget {budget / 1e6:.1f} MB {in_run}; {plan.reduced} reduced, predicted step "
            f"× {plan.predicted_step_ms / plan.data['plain_step_ms']:.2f}"
            f"{'' if plan.met else '; planned budget NOT met (lowest peak found)'}"
        )
        add(label, *res, predicted=plan.predicted_peak, extra=note)

    for frac in budgets:
        for store, codec in variants:
            recompute = codec == "recompute"
            if recompute:
                codec = None
            kind = "recompute" if recompute else ("store" if store else "memory") + (f"+{codec}" if codec else "")
            t = time.perf_counter()
            plan = mt.plan(trace, frac, store=store, codec=codec, recompute=recompute)
            plan_s = time.perf_counter() - t
            memplan_row(f"memplan {kind} budget {frac:.2f} (plan {plan_s:.1f} s)", plan)
    # At checkpointing's measured peak.
    plan = mt.plan(trace, int(ck[0]), store=True)
    memplan_row("memplan store at checkpointing's peak", plan)
    m = trace.data["machine"]
    print(
        f"\n(trace {trace_s:.1f} s; {len(trace.data['ops'])} ops, {len(trace.saved)} saved "
        f"tensors; store {m['d2h_bytes_per_ms'] / 1e6:.2f} GB/s out, "
        f"{m['h2d_bytes_per_ms'] / 1e6:.2f} GB/s back, codec {m['codec_bytes_per_ms'] / 1e6:.2f} GB/s)"
    )
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--small", action="store_true", help="the CI test's small models")
    ap.add_argument("--only", choices=["resnet18", "transformer"], default=None)
    ap.add_argument("--json", default=None, help="also write the rows as JSON here")
    ap.add_argument(
        "--keep-grads",
        action="store_true",
        help="zero_grad(set_to_none=False): gradient buffers live before the step",
    )
    ap.add_argument("--save-traces", default=None, metavar="DIR", help="keep each model's trace here")
    args = ap.parse_args()
    global KEEP_GRADS, SAVE_TRACES
    KEEP_GRADS = args.keep_grads
    SAVE_TRACES = args.save_traces
    torch.set_num_threads(max(1, torch.get_num_threads()))
    with mt.counting():
        run(args)


def run(args):
    rows = []
    variants = [
        (True, None),
        (False, "fp16"),
        (False, "bf16"),
        (True, "fp16"),
        (True, "int8"),
        (False, "recompute"),
    ]
    if args.small:
        bench(small_cnn, args.steps, args.device, [0.6], variants[:2], rows)
        bench(
            lambda d: transformer(d, layers=2, d=64, heads=2, ff=128, seq=64, batch=2),
            args.steps, args.device, [0.6], variants[:2], rows,
        )
    else:
        if args.only in (None, "resnet18"):
            bench(resnet18, args.steps, args.device, [0.8, 0.67, 0.5], variants, rows)
        if args.only in (None, "transformer"):
            bench(transformer, args.steps, args.device, [0.5, 0.3, 0.25], variants, rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
