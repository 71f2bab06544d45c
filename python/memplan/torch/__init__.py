"""memplan.torch: the swap method (the `swap` method) run inside real PyTorch training.

Three steps, added to a training loop::

    trace = memplan.torch.trace(model, x, lambda out: loss_fn(out, y))
    plan = memplan.torch.plan(trace, budget=0.6)        # planned in Rust, simulated
    with memplan.torch.apply(plan):
        loss_fn(model(x), y).backward()

See doc/swap.md ("In PyTorch").
"""

from ._apply import PlanNotApplied, apply
from ._counting import AllocatorUnavailable, counting
from ._plan import Plan, plan
from ._trace import Trace, trace

__all__ = [
    "AllocatorUnavailable",
    "Plan",
    "PlanNotApplied",
    "Trace",
    "apply",
    "counting",
    "plan",
    "trace",
]
