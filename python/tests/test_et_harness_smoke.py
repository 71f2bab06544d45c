"""Smoke test of et_harness: export a small model with ExecuTorch, plan it, run it.

Lowers the small llama-like decoder with ExecuTorch's default planner, again with
`greedy_algo()` passed explicitly, and again with ExecuTorch's bare `greedy` (the
`MemoryAlgoResult` form); every program must run in ExecuTorch's runtime and give
bit-identical outputs, with the same non-empty planned arena. A planner that puts every
tensor at offset 0 must be rejected by the harness's plan check, which ExecuTorch itself
skips for any algorithm not named "greedy".

Needs the `executorch` pip package (with torch and torchvision); fails, not skips, without it.
"""

import pytest
import torch
from executorch.exir.memory_planning import greedy

import et_harness as h


@pytest.fixture(scope="module")
def llama():
    """The model and its inputs, shared so that it is exported once (lower caches per model)."""
    return h.MODELS["llama"]()


def test_default_and_explicit_greedy_agree(llama):
    model, inputs = llama

    default = h.lower(model, inputs)
    assert default.arena > 0
    assert default.arena == sum(default.buffer_sizes[1:])
    got_default = h.run(default.pte, inputs)
    assert len(got_default) == 1

    for algo in (h.greedy_algo(), greedy):
        explicit = h.lower(model, inputs, algo)
        assert explicit.buffer_sizes == default.buffer_sizes
        got_explicit = h.run(explicit.pte, inputs)
        assert len(got_explicit) == len(got_default)
        assert all(torch.equal(a, b) for a, b in zip(got_default, got_explicit))

    with torch.no_grad():
        eager = model(*inputs)
    torch.testing.assert_close(got_default[0], eager, rtol=1e-4, atol=1e-4)


def all_at_offset_zero(alignment, specs, graph_module, graph_signature, extra_padding):
    """A wrong planner: every tensor in mem_id 1 at offset 0."""
    size = 0
    for spec in specs:
        spec.realign(alignment)
        spec.mem_id, spec.mem_offset, spec.mem_obj_id = 1, 0, None
        size = max(size, spec.allocated_memory)
    return [0, size + extra_padding]


def test_plan_check_rejects_overlap(llama):
    model, inputs = llama
    with pytest.raises(h.PlanError, match="live tensors share bytes"):
        h.lower(model, inputs, all_at_offset_zero)
    # The same wrong plan lowers without complaint when the check is off.
    assert h.lower(model, inputs, all_at_offset_zero, check=False).arena > 0
