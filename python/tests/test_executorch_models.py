"""memplan as ExecuTorch's memory planner on six exported models, proven by running them.

Each model (random weights, see et_harness.py) is lowered twice, with ExecuTorch's own
greedy planner and with memplan (`memplan.executorch`); both programs run in ExecuTorch's
runtime on the same input and must give identical outputs, both plans pass the harness's
independent overlap check, and memplan's arena must be no larger (≤ 0.70× on resnet50).
Set MEMPLAN_ET_REPORT=PATH for the table as Markdown.
"""

import os

import pytest
import torch
from executorch.exir.banked_memory_planning import Bank, TargetMemoryMap
from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite

import et_harness as et
import memplan
from memplan.executorch import BankPlacementError, MemplanAlgorithm, memplan_algorithm

TIME_LIMIT = 3.0


def assert_same_outputs(expected, actual, what):
    assert len(expected) == len(actual), what
    for j, (a, b) in enumerate(zip(expected, actual)):
        assert torch.equal(a, b), f"{what}: output {j} differs"


@pytest.mark.parametrize("name", list(et.MODELS))
def test_memplan_plans_run_identically_and_smaller(name):
    model, inputs = et.MODELS[name]()
    greedy = et.lower(model, inputs)
    algorithm = MemplanAlgorithm("search", time_limit=TIME_LIMIT)
    ours = et.lower(model, inputs, algo=MemoryPlanningAlgorithmSuite([algorithm]))
    arena, bound = algorithm.last_arenas[1]
    assert ours.arena == arena, "the program records the arena memplan planned"
    assert ours.arena <= greedy.arena
    if name == "resnet50":
        assert ours.arena <= 0.70 * greedy.arena
    assert_same_outputs(et.run(greedy.pte, inputs), et.run(ours.pte, inputs), name)
    report = os.environ.get("MEMPLAN_ET_REPORT")
    if report:
        with open(report, "a") as f:
            f.write(
                f"| {name} | {greedy.arena:,} | {ours.arena:,} | {ours.arena / greedy.arena:.3f} "
                f"| {bound:,} | {ours.arena / max(bound, 1):.3f} | yes |\n"
            )


def error_chain(error):
    while error is not None:
        yield error
        error = error.__cause__ or error.__context__


def test_an_overlapping_plan_is_refused_at_export():
    model, inputs = et.MODELS["llama"]()
    everything_at_zero = memplan_algorithm(planner=lambda problem: [0] * len(problem))
    with pytest.raises(Exception) as info:
        et.lower(model, inputs, algo=everything_at_zero, check=False)
    refusals = [e for e in error_chain(info.value) if isinstance(e, memplan.PlanningError)]
    assert refusals, f"not refused by memplan: {info.value!r}"
    assert "memplan refuses" in str(refusals[0]) and "share" in str(refusals[0])


def test_banks_spill_and_overflow_on_a_real_model():
    model, inputs = et.MODELS["mobilenet_v3_small"]()
    single = et.lower(model, inputs, algo=memplan_algorithm(time_limit=TIME_LIMIT))
    sram = single.arena // 2
    target = TargetMemoryMap([Bank("sram", sram, 1), Bank("dram", 64 << 20, 2)])
    banked = et.lower(model, inputs, algo=memplan_algorithm(time_limit=TIME_LIMIT, target=target))
    assert 0 < banked.buffer_sizes[1] <= sram and banked.buffer_sizes[2] > 0
    assert_same_outputs(et.run(single.pte, inputs), et.run(banked.pte, inputs), "banked")
    tiny = TargetMemoryMap([Bank("sram", 4096, 1)])
    with pytest.raises(Exception) as info:
        et.lower(model, inputs, algo=memplan_algorithm(target=tiny), check=False)
    errors = [e for e in error_chain(info.value) if isinstance(e, BankPlacementError)]
    assert errors and "sram" in str(errors[0])


def test_xnnpack_delegate_with_extra_padding():
    model, inputs = et.MODELS["mobilenet_v3_small"]()
    greedy = et.lower(model, inputs, xnnpack=True)
    ours = et.lower(model, inputs, algo=memplan_algorithm(time_limit=TIME_LIMIT), xnnpack=True)
    assert ours.arena <= greedy.arena
    assert_same_outputs(et.run(greedy.pte, inputs), et.run(ours.pte, inputs), "xnnpack")
