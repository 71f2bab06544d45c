"""The swap method run in real PyTorch training (memplan.torch), the CI version of
scripts/bench_torch_swap.py: a small CNN and a small transformer are traced, planned in
Rust and trained with the plan applied. Checked by running: gradients identical to plain
with the store, bounded with fp16; the measured peak (counting allocator) below plain
and within 10 % of the plan's prediction; a step that differs from the trace detected."""

import json
import os
import subprocess
import warnings
from pathlib import Path

import pytest
import torch

import memplan
import memplan.torch as mt

ROOT = Path(__file__).resolve().parents[2]


def small_cnn(batch=8, inplace=False):
    torch.manual_seed(0)
    c = 32
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, c, 3, padding=1), torch.nn.BatchNorm2d(c), torch.nn.ReLU(inplace),
        torch.nn.Conv2d(c, c, 3, padding=1), torch.nn.BatchNorm2d(c), torch.nn.ReLU(inplace),
        torch.nn.Conv2d(c, c, 3, padding=1), torch.nn.ReLU(inplace),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(c, 10),
    )
    x = torch.randn(batch, 3, 48, 48)
    y = torch.randint(0, 10, (batch,))
    return model, x, (lambda out: torch.nn.functional.cross_entropy(out, y))


def small_transformer():
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[
        torch.nn.TransformerEncoderLayer(128, 4, 256, dropout=0.0, batch_first=True)
        for _ in range(3)
    ])
    x = torch.randn(2, 192, 128)
    y = torch.randn(2, 192, 128)  # a regression target: gradients reach every layer
    return model, x, (lambda out: torch.nn.functional.mse_loss(out, y))


def step(model, x, loss_fn, plan=None):
    """One step; returns (measured peak above the step's start, gradients, runtime)."""
    model.zero_grad(set_to_none=True)
    with mt.counting() as counter:
        base = counter.live()
        counter.reset_peak()
        runtime = None
        if plan is None:
            loss_fn(model(x)).backward()
        else:
            with mt.apply(plan) as runtime:
                loss_fn(model(x)).backward()
        peak = counter.peak() - base
    grads = [p.grad.detach().clone() for p in model.parameters()]
    return peak, grads, runtime


def rel(a, b):
    """The largest relative L2 error of a parameter's gradient, over gradients at least
    1e-3 of the largest (scripts/bench_torch_swap.py's measure: a convolution's bias
    before a batch norm has a gradient that is zero up to rounding)."""
    norms = [float(y.norm()) for y in b]
    floor = 1e-3 * max(norms)
    return max(float((x - y).norm()) / n for x, y, n in zip(a, b, norms) if n > 0 and n >= floor)


def same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


MODELS = {
    "cnn": small_cnn,
    "cnn-inplace": lambda: small_cnn(inplace=True),  # ReLU(inplace=True), as resnets have
    "transformer": small_transformer,
}


@pytest.fixture(scope="module", params=list(MODELS))
def traced(request):
    model, x, loss_fn = MODELS[request.param]()
    trace = mt.trace(model, x, loss_fn)
    plain_peak, plain_grads, _ = step(model, x, loss_fn)
    return request.param, model, x, loss_fn, trace, plain_peak, plain_grads


def test_the_trace_is_the_step(traced):
    name, model, x, loss_fn, trace, plain_peak, _ = traced
    d = trace.data
    assert d["format"] == "memplan-torch-trace"
    assert d["first_backward"] > 0
    assert trace.saved, "autograd saved tensors"
    # Parameters and the input are never candidates: every saved storage was made by
    # an op of the step.
    producers = {v["id"]: v["producer"] for v in d["values"]}
    assert all(producers[p["value"]] is not None for p in trace.saved)
    # The traced peak is the plain step's (same allocator, same step), to 5 % (a first
    # step makes a few lazy allocations).
    assert abs(trace.measured_peak - plain_peak) <= 0.05 * plain_peak
    # Every pack is unpacked in backward.
    assert {u["ordinal"] for u in d["unpacks"]} == {p["ordinal"] for p in trace.saved}


def test_store_plan_exact_and_lower(traced):
    name, model, x, loss_fn, trace, plain_peak, plain_grads = traced
    plan = mt.plan(trace, 0.6, store=True)
    assert plan.reduced > 0, plan
    peak, grads, rt = step(model, x, loss_fn, plan)
    assert rt.diverged is None
    assert rt.stats["reduced"] == plan.reduced
    assert same(grads, plain_grads), f"{name}: gradients differ by {rel(grads, plain_grads)}"
    assert peak < plain_peak, (peak, plain_peak)
    # The simulator's prediction matches the run.
    assert abs(plan.predicted_peak - peak) <= 0.10 * peak, (plan.predicted_peak, peak)


@pytest.mark.parametrize("codec,store", [("fp16", False), ("bf16", False), ("fp16", True), ("fp24", True), ("int8", True)])
def test_codecs_bounded(traced, codec, store):
    name, model, x, loss_fn, trace, plain_peak, plain_grads = traced
    plan = mt.plan(trace, 0.6, store=store, codec=codec)
    peak, grads, rt = step(model, x, loss_fn, plan)
    assert rt.diverged is None
    # Bounds on the worst parameter (stricter than one norm over all gradients): fp16
    # keeps 11 bits of mantissa, bf16 8, fp24 16; int8 has 8 bits per value with one
    # scale per 256 (measured worst: ~7 % on resnet18 and a transformer).
    bound = {"fp16": 5e-3, "bf16": 3e-2, "fp24": 5e-4, "int8": 0.3}[codec]
    if not plan.reduced:
        pytest.fail(f"{name} {codec}: the plan reduces nothing: {plan}")
    err = rel(grads, plain_grads)
    assert err <= bound, f"{name} {codec}: gradient error {err}"
    if plan.reduced:
        assert peak < plain_peak or not plan.met
    assert abs(plan.predicted_peak - peak) <= 0.10 * peak, (plan.predicted_peak, peak)


def test_recompute_plan_exact(traced):
    """Delete and recompute: the producer runs again at the first reader; only
    storages a pure op made (no argument written, no random numbers) that nothing
    overwrote are candidates, so the gradients are the plain ones."""
    name, model, x, loss_fn, trace, plain_peak, plain_grads = traced
    plan = mt.plan(trace, 0.6, store=False, recompute=True)
    assert plan.data["reduction"]["recompute"]
    assert all(r["recompute"] for r in plan.data["restores"])
    peak, grads, rt = step(model, x, loss_fn, plan)
    assert rt.diverged is None
    assert rel(grads, plain_grads) <= 1e-6, rel(grads, plain_grads)
    if plan.reduced:
        assert rt.stats["restored_on_demand"] >= 1
        assert peak < plain_peak
    assert abs(plan.predicted_peak - peak) <= 0.10 * peak, (plan.predicted_peak, peak)
    with pytest.raises(ValueError, match="recompute=True"):
        mt.plan(trace, 0.6, recompute=True)  # the store is on by default
    # Recomputation has no side effects: the batch norms' running statistics after a
    # recomputing step are those after a plain one.
    state = {k: v.clone() for k, v in model.state_dict().items()}
    step(model, x, loss_fn)
    after_plain = {k: v.clone() for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    step(model, x, loss_fn, plan)
    for k, v in model.state_dict().items():
        assert torch.equal(v, after_plain[k]), k


def test_method_as_stated_and_other_planners(traced):
    name, model, x, loss_fn, trace, plain_peak, plain_grads = traced
    for kwargs in [dict(improvements=False), dict(planner="lms"), dict(planner="everything"),
                   dict(max_overhead=0.5), dict(th_tts_ms=0.0, th_size=0, max_count=3)]:
        budget = None if "max_overhead" in kwargs else 0.5
        plan = mt.plan(trace, budget, **kwargs)
        peak, grads, rt = step(model, x, loss_fn, plan)
        assert rt.diverged is None, kwargs
        assert same(grads, plain_grads), kwargs
        assert abs(plan.predicted_peak - peak) <= 0.10 * peak, (kwargs, plan.predicted_peak, peak)


def test_a_different_step_is_detected_and_stays_exact():
    model, x, loss_fn = small_cnn(batch=8)
    trace = mt.trace(model, x, loss_fn)
    plan = mt.plan(trace, 0.6)
    # Another batch size: other shapes from the first saved tensor on.
    model2, x2, loss2 = small_cnn(batch=4)
    model2.load_state_dict(model.state_dict())
    _, plain_grads, _ = step(model2, x2, loss2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, grads, rt = step(model2, x2, loss2, plan)
    ours = [w for w in caught if issubclass(w.category, mt.PlanNotApplied)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert rt.diverged is not None and "saved tensor 0" in rt.diverged
    assert same(grads, plain_grads)
    # Another branch: the same shapes, another op sequence (a ReLU is skipped): detected at
    # the first op that differs, after some tensors were already reduced; still exact.
    model3, x3, loss3 = small_cnn(batch=8)
    model3.load_state_dict(model.state_dict())
    model3[5] = torch.nn.Identity()
    _, plain_grads, _ = step(model3, x3, loss3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, grads, rt = step(model3, x3, loss3, plan)
    assert sum(issubclass(w.category, mt.PlanNotApplied) for w in caught) == 1
    assert rt.diverged is not None
    assert same(grads, plain_grads)


def test_trace_file_round_trip_and_cli(tmp_path):
    model, x, loss_fn = small_cnn()
    trace = mt.trace(model, x, loss_fn)
    path = tmp_path / "step.json"
    trace.save(path)
    again = mt.Trace.load(path)
    assert again.data == json.loads(trace.to_json())
    a = mt.plan(trace, 0.6)
    b = mt.plan(again, 0.6)
    assert (a.data["reduced"], a.predicted_peak) == (b.data["reduced"], b.predicted_peak)
    exe = os.environ.get("MEMPLAN_BIN") or str(ROOT / "target/debug/memplan")
    out = subprocess.run([exe, "swap", str(path), "--budget", "60%", "--planner", "method",
                          "--format", "json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report, out.stdout


def test_bad_arguments_are_clear(tmp_path):
    model, x, loss_fn = small_cnn(batch=2)
    trace = mt.trace(model, x, loss_fn)
    with pytest.raises(ValueError, match="codec 'fp12'"):
        mt.plan(trace, 0.5, codec="fp12")
    with pytest.raises(ValueError, match="as a fraction must be in"):
        mt.plan(trace, 1.5)
    with pytest.raises(ValueError, match="give a goal"):
        mt.plan(trace)
    with pytest.raises(ValueError, match="needs a codec"):
        mt.plan(trace, 0.5, store=False)
    with pytest.raises(ValueError, match='planner "best"'):
        mt.plan(trace, 0.5, planner="best")
    with pytest.raises(TypeError, match="memplan.torch.Trace"):
        mt.plan({"format": "x"}, 0.5)
    bad = trace.data.copy()
    bad["ops"] = [dict(trace.data["ops"][0], inputs=[10**6])] + trace.data["ops"][1:]
    with pytest.raises(memplan.FormatError, match="reads storage 1000000"):
        mt.plan(mt.Trace(bad), 0.5)
    path = tmp_path / "not.json"
    path.write_text('{"format": "something-else"}')
    with pytest.raises(ValueError, match="not a memplan-torch-trace"):
        mt.Trace.load(path)
