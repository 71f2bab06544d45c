"""Planning a traced step with the swap method (in Rust, through memplan's binding)."""

from __future__ import annotations

import concurrent.futures
import json
import os
import weakref
from typing import Any, Dict, Optional, Union

import torch

from .._memplan import swap_plan_trace
from ._trace import Trace

CODECS = ("fp16", "bf16", "fp24", "int8")


class Plan:
    """A swap plan for one traced step: what :func:`apply` executes, and what the
    simulator predicts (``predicted_peak``, ``predicted_step_ms``) next to the traced
    step's measured peak (``measured_peak``)."""

    def __init__(self, data: Dict[str, Any], trace: Trace, codec: Optional[str]) -> None:
        self.data = data
        self.trace = trace
        self.codec = codec
        self._store: Any = None
        self._workers: Any = None

    def store(self, directory: Optional[str] = None) -> Any:
        """The host store of the steps this plan runs: one per plan, kept from step to
        step so that a step reuses the file ranges the last one released (writing into
        new file pages is several times slower). Closed by :meth:`close` or when the
        plan is collected."""
        if self._store is None:
            from ._store import HostStore

            device = torch.device(self.trace.data.get("device", "cpu"))
            self._store = HostStore(device, directory)
            weakref.finalize(self, self._store.close)
        return self._store

    def workers(self) -> Any:
        """The copy-out and copy-in workers (one thread each: the two copy engines of the
        plan's machine), kept from step to step."""
        if self._workers is None:
            out = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="memplan-out")
            back = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="memplan-in")
            self._workers = (out, back)
            weakref.finalize(self, _shutdown, self._workers)
        return self._workers

    def close(self) -> None:
        """Closes the host store (its file is already unlinked: nothing is left) and
        stops the workers."""
        if self._store is not None:
            self._store.close()
            self._store = None
        if self._workers is not None:
            _shutdown(self._workers)
            self._workers = None

    @property
    def predicted_peak(self) -> int:
        return int(self.data["predicted_peak_bytes"])

    @property
    def predicted_step_ms(self) -> float:
        return float(self.data["predicted_step_ms"])

    @property
    def measured_peak(self) -> int:
        return int(self.data["measured_peak_bytes"])

    @property
    def met(self) -> bool:
        return bool(self.data["met"])

    @property
    def reduced(self) -> int:
        """Storages the plan reduces."""
        return len(self.data["reduced"])

    def to_json(self) -> str:
        return json.dumps({**self.data, "codec_executed": self.codec}, separators=(",", ":"))

    def save(self, path: "str | os.PathLike[str]") -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_json())

    def __repr__(self) -> str:
        d = self.data
        goal = (
            f"budget {d['budget_bytes']} B"
            if d.get("budget_bytes") is not None
            else f"max overhead {d['max_overhead']}"
        )
        return (
            f"<memplan.torch.Plan: {len(d['reduced'])} storages reduced "
            f"({'store' if d['reduction']['to_host'] else ('recompute' if d['reduction'].get('recompute') else 'in memory')}"
            f"{', ' + self.codec if self.codec else ''}), {goal}, "
            f"predicted peak {d['predicted_peak_bytes']} B "
            f"(traced {d['measured_peak_bytes']} B), met={d['met']}>"
        )


def _shutdown(workers: Any) -> None:
    for pool in workers:
        pool.shutdown(wait=True)


def plan(
    trace: Trace,
    budget: Union[int, float, None] = None,
    *,
    max_overhead: Optional[float] = None,
    store: bool = True,
    codec: Optional[str] = None,
    recompute: bool = False,
    planner: str = "method",
    improvements: bool = True,
    th_tts_ms: Optional[float] = None,
    th_size: Optional[int] = None,
    max_count: Optional[int] = None,
) -> Plan:
    """Plans ``trace`` with the swap method.

    Goal, exactly one: ``budget`` — peak tensor bytes of the step, an ``int``, or a
    ``float`` in (0, 1] as a fraction of the traced peak; or ``max_overhead`` — allowed
    step-time increase (0.1 = 10 %), then the lowest peak.

    Reductions: ``store`` copies to the host store (a file on a CPU, pinned memory on a
    GPU); ``codec`` compresses fp32 first: ``"fp16"``, ``"bf16"`` (planned with fp16's
    sizes: both are 2 bytes), ``"fp24"`` or ``"int8"`` (per-group scales).
    ``recompute=True`` (with ``store=False``) deletes chosen activations instead and runs
    their producer again when backward needs them, for storages a pure op made (no
    argument written, no random numbers) that nothing overwrote. Planners:
    ``"method"`` (the `swap` method; ``improvements=False`` for the method as stated),
    ``"lms"``, ``"everything"``. ``th_tts_ms``, ``th_size`` (bytes) and ``max_count`` fix
    the method's thTTS, thS and N; unset, the planner searches them.
    """
    if not isinstance(trace, Trace):
        raise TypeError(f"trace must be a memplan.torch.Trace, not {type(trace).__name__}")
    if codec is not None and codec not in CODECS:
        raise ValueError(f"codec {codec!r} is not one of {', '.join(CODECS)} (or None)")
    if budget is not None:
        if isinstance(budget, bool) or not isinstance(budget, (int, float)):
            raise TypeError("budget must be bytes (int) or a fraction of the traced peak (float)")
        if isinstance(budget, float):
            if not 0.0 < budget <= 1.0:
                raise ValueError(f"budget {budget} as a fraction must be in (0, 1]")
            budget = int(trace.measured_peak * budget)
        elif budget < 0:
            raise ValueError(f"budget {budget} bytes is negative")
    wire = "fp16" if codec == "bf16" else codec
    text = swap_plan_trace(
        trace.to_json(),
        budget=budget,
        max_overhead=max_overhead,
        to_host=store,
        codec=wire,
        recompute=recompute,
        planner=planner,
        improvements=improvements,
        th_tts_ms=th_tts_ms,
        th_size=th_size,
        max_count=max_count,
    )
    return Plan(json.loads(text), trace, codec)
