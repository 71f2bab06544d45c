"""Tracing one training step: every operator, every storage's life, every saved tensor.

The trace is what memplan's swap planner reads (``memplan-swap``'s ``torch`` front-end,
format ``memplan-torch-trace`` version 1, documented in ``doc/swap.md``).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from . import _counting

FORMAT = "memplan-torch-trace"
VERSION = 1


def storage_key(t: torch.Tensor) -> int:
    """The identity of a tensor's storage while it is alive (its StorageImpl address)."""
    return t.untyped_storage()._cdata


def tensors_in(obj: Any) -> List[torch.Tensor]:
    leaves, _ = tree_flatten(obj)
    return [x for x in leaves if isinstance(x, torch.Tensor)]


# Ops with effects their schema does not show: batch norm updates its running statistics
# in training (native_batch_norm's schema marks no argument as written); the others draw
# random numbers.
HIDDEN_EFFECTS = ("batch_norm", "dropout", "rrelu", "bernoulli", "rand", "normal", "uniform")


def written_arguments(func: Any, args: Sequence[Any], kwargs: Dict[str, Any]) -> List[torch.Tensor]:
    """The tensors an op writes into, by its schema (every tensor argument when the
    schema cannot be read)."""
    try:
        schema = func._schema
        written = []
        for i, arg in enumerate(schema.arguments):
            info = arg.alias_info
            if info is None or not info.is_write:
                continue
            value = args[i] if i < len(args) else kwargs.get(arg.name)
            written.extend(tensors_in(value))
        return written
    except (AttributeError, IndexError, TypeError):
        return tensors_in((args, kwargs))


class Storages:
    """Storages by identity, alive or not: an id per storage life (an address reused
    after a free is a new storage)."""

    def __init__(self) -> None:
        self.live: Dict[int, Tuple[int, StorageWeakRef]] = {}
        self.values: List[Dict[str, Any]] = []

    def register(self, t: torch.Tensor, producer: Optional[int], external: bool) -> int:
        key = storage_key(t)
        known = self.live.get(key)
        if known is not None and not known[1].expired():
            return known[0]
        vid = len(self.values)
        storage = t.untyped_storage()
        self.values.append(
            {
                "id": vid,
                "bytes": int(storage.nbytes()),
                "producer": None if external else producer,
                "freed_after": None,
                "mutated": False,
                "dtype": str(t.dtype).replace("torch.", ""),
                "device": str(t.device),
            }
        )
        self.live[key] = (vid, StorageWeakRef(storage))
        return vid

    def lookup(self, t: torch.Tensor) -> Optional[int]:
        known = self.live.get(storage_key(t))
        if known is None or known[1].expired():
            return None
        return known[0]

    def sweep(self, after_op: int) -> None:
        """Marks every storage freed since the last sweep as freed after op `after_op`."""
        dead = [key for key, (_, ref) in self.live.items() if ref.expired()]
        for key in dead:
            vid, _ = self.live.pop(key)
            self.values[vid]["freed_after"] = after_op


class _Recorder(TorchDispatchMode):
    def __init__(self, storages: Storages, counter: Any) -> None:
        super().__init__()
        self.storages = storages
        self.counter = counter
        self.ops: List[Dict[str, Any]] = []
        self.phase = "forward"
        self.base = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        index = len(self.ops)
        self.storages.sweep(index - 1)
        inputs = []
        for t in tensors_in((args, kwargs)):
            vid = self.storages.lookup(t)
            if vid is None:
                vid = self.storages.register(t, None, external=True)
            if vid not in inputs:
                inputs.append(vid)
        self.counter.sync()
        before = self.counter.live()
        self.counter.reset_peak()
        start = time.perf_counter()
        out = func(*args, **kwargs)
        self.counter.sync()
        ms = (time.perf_counter() - start) * 1e3
        peak = self.counter.peak()
        self.storages.sweep(index)
        outputs = []
        new_bytes = 0
        for t in tensors_in(out):
            if t.device.type == "meta":
                continue
            known = self.storages.lookup(t)
            if known is None:
                known = self.storages.register(t, index, external=False)
                new_bytes += self.storages.values[known]["bytes"]
            if known not in outputs and known not in inputs:
                outputs.append(known)
        mutable = bool(getattr(func, "_schema", None) is not None and func._schema.is_mutable)
        if mutable:
            # The arguments an op writes into (its schema's `Tensor(a!)`): their storage
            # may change after it was made, so re-running its producer would not give
            # it back.
            for t in written_arguments(func, args, kwargs):
                vid = self.storages.lookup(t)
                if vid is not None:
                    self.storages.values[vid]["mutated"] = True
        seeded = torch.Tag.nondeterministic_seeded in getattr(func, "tags", ())
        hidden = any(word in str(func) for word in HIDDEN_EFFECTS)
        self.ops.append(
            {
                "name": str(func),
                "pure": not (mutable or seeded or hidden),
                "phase": self.phase,
                "ms": ms,
                "inputs": inputs,
                "outputs": outputs,
                "scratch": max(0, int(peak - before - new_bytes)),
                "peak": int(peak - self.base),
            }
        )
        return out


class _CudaCounter:
    """The CUDA caching allocator's statistics, read like the counting allocator."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def sync(self) -> None:
        torch.cuda.synchronize(self.device)

    def live(self) -> int:
        return torch.cuda.memory_allocated(self.device)

    def peak(self) -> int:
        return torch.cuda.max_memory_allocated(self.device)

    def reset_peak(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.device)


class _CpuCounter:
    """The counting CPU allocator (see _counting.py)."""

    def __init__(self, module: Any) -> None:
        self.m = module

    def sync(self) -> None:
        pass

    def live(self) -> int:
        return self.m.live()

    def peak(self) -> int:
        return self.m.peak()

    def reset_peak(self) -> None:
        self.m.reset_peak()


def measure_machine(device: torch.device, store_dir: Optional[str]) -> Dict[str, float]:
    """Speeds of the store and the codecs on this machine, bytes per millisecond."""
    n = 8 << 20
    x = torch.randn(n // 4, device=device)
    cuda = torch.device(device).type == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    timings: Dict[str, float] = {}
    from ._store import HostStore

    # Warm rates, as a step after the first sees them: the store reuses the file
    # ranges it released (a first write into new file pages is several times slower),
    # and the codec's kernels are loaded. A warm-up round, then the best of five: a
    # machine shared with other work only ever makes a round slower, and a copy that
    # runs slower than planned costs step time, not memory (the ops serialized after a
    # reduction wait for it), while one planned slower than it runs makes the plan
    # over-predict its peak.
    store = HostStore(device, store_dir)
    codec_ms, d2h_ms, h2d_ms = [], [], []
    try:
        for _ in range(6):
            sync()
            start = time.perf_counter()
            x.to(torch.float16).to(torch.float32)
            sync()
            codec_ms.append((time.perf_counter() - start) * 1e3)
            start = time.perf_counter()
            handles = [store.put(part) for part in x.view(torch.uint8).reshape(4, -1)]
            sync()
            d2h_ms.append((time.perf_counter() - start) * 1e3)
            start = time.perf_counter()
            for h in handles:
                store.get(h, h[1])
            sync()
            h2d_ms.append((time.perf_counter() - start) * 1e3)
            for h in handles:
                store.release(h)
    finally:
        store.close()
    best = lambda xs: min(xs[1:])  # noqa: E731
    timings["codec_bytes_per_ms"] = 2 * n / max(best(codec_ms), 1e-6)
    d2h_ms = best(d2h_ms)
    h2d_ms = best(h2d_ms)
    timings["d2h_bytes_per_ms"] = n / max(d2h_ms, 1e-6)
    timings["h2d_bytes_per_ms"] = n / max(h2d_ms, 1e-6)
    timings["copy_latency_ms"] = 0.01
    return timings


class Trace:
    """One traced training step (see :func:`trace`). ``data`` is the JSON document."""

    def __init__(self, data: Dict[str, Any]) -> None:
        self.data = data

    @property
    def measured_peak(self) -> int:
        """The step's peak of live tensor bytes, above the bytes live when it started."""
        return int(self.data["measured_peak_bytes"])

    @property
    def saved(self) -> List[Dict[str, Any]]:
        return self.data["packs"]

    def to_json(self) -> str:
        return json.dumps(self.data, separators=(",", ":"))

    def save(self, path: "str | os.PathLike[str]") -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_json())

    @staticmethod
    def load(path: "str | os.PathLike[str]") -> "Trace":
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if data.get("format") != FORMAT:
            raise ValueError(f"{os.fspath(path)}: not a {FORMAT} file")
        return Trace(data)

    def __repr__(self) -> str:
        d = self.data
        return (
            f"<memplan.torch.Trace: {len(d['ops'])} ops, {len(d['packs'])} saved tensors, "
            f"measured peak {d['measured_peak_bytes']} B>"
        )


def trace(
    model: Callable[..., Any],
    inputs: Any,
    loss_fn: Optional[Callable[[Any], torch.Tensor]] = None,
    *,
    store_dir: Optional[str] = None,
    machine: Optional[Dict[str, float]] = None,
) -> Trace:
    """Runs one training step (forward, ``loss_fn(output)``, backward) and records it.

    ``inputs`` is a tensor or a tuple of positional arguments to ``model``; ``loss_fn``
    maps the model's output to a scalar loss (default: ``output.sum()``). Parameters,
    buffers and the inputs are never candidates. Gradients the step makes are left in
    ``.grad`` as by a normal step.
    """
    args = inputs if isinstance(inputs, tuple) else (inputs,)
    loss_fn = loss_fn or (lambda out: out.sum())
    storages = Storages()
    external = set()
    module_like = hasattr(model, "parameters")
    if module_like:
        for p in list(model.parameters()) + list(model.buffers()):
            external.add(storages.register(p, None, external=True))
    for t in tensors_in(args):
        external.add(storages.register(t, None, external=True))
    device = next((t.device for t in tensors_in(args)), torch.device("cpu"))
    packs: List[Dict[str, Any]] = []
    unpacks: List[Dict[str, Any]] = []
    cuda = device.type == "cuda"
    with contextlib.ExitStack() as stack:
        if cuda:
            counter: Any = _CudaCounter(device)
        else:
            counter = _CpuCounter(stack.enter_context(_counting.counting()))
        recorder = _Recorder(storages, counter)

        def pack(t: torch.Tensor) -> Any:
            vid = storages.lookup(t)
            if vid is None:
                # Autograd saves an op's inputs before the op runs: a storage no op has
                # produced yet is from before the step (a target, a constant).
                vid = storages.register(t, None, external=True)
            if vid in external or storages.values[vid]["producer"] is None:
                return ("external", t)
            ordinal = len(packs)
            packs.append(
                {
                    "ordinal": ordinal,
                    "value": vid,
                    "op": len(recorder.ops) - 1,
                    "shape": list(t.shape),
                    "stride": list(t.stride()),
                    "offset": int(t.storage_offset()),
                    "dtype": str(t.dtype).replace("torch.", ""),
                    "bytes": int(t.untyped_storage().nbytes()),
                }
            )
            return ("saved", ordinal, t)

        def unpack(packed: Any) -> torch.Tensor:
            if packed[0] == "saved":
                unpacks.append({"ordinal": packed[1], "op": len(recorder.ops)})
                return packed[2]
            return packed[1]

        counter.sync()
        recorder.base = counter.live()
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            with recorder:
                out = model(*args)
                loss = loss_fn(out)
                recorder.phase = "backward"
                first_backward = len(recorder.ops)
                loss.backward()
        del out, loss
        storages.sweep(len(recorder.ops) - 1)
        measured = max((op["peak"] for op in recorder.ops), default=0)
    data = {
        "format": FORMAT,
        "version": VERSION,
        "model": type(model).__name__,
        "device": str(device),
        "torch": torch.__version__,
        "first_backward": first_backward,
        "ops": recorder.ops,
        "values": storages.values,
        "packs": packs,
        "unpacks": unpacks,
        "measured_peak_bytes": measured,
        "machine": machine or measure_machine(device, store_dir),
    }
    return Trace(data)

