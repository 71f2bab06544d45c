"""Executing a swap plan in a training step: saved-tensor hooks and an op counter.

The plan names storages of the traced step (by their trace id) and ops (by their
index in the step). At run time the ops are counted by a dispatch mode, and the saved
tensors arrive at the pack hook in the traced order (pack ordinal), so each saved tensor
is matched to its traced storage by ordinal and checked by shape, dtype and storage size.

- **Reduce** (pack hook): the first pack of a planned storage compresses it (compute
  thread, as the plan's codec node) and/or hands it to the copy-out worker, which writes
  it to the store and drops the reference; the storage is freed once nothing else holds
  it. The pack returns a handle without a reference to the tensor.
- **Serialization**: an op the plan serializes after a reduction waits for it.
- **Restore**: after the op the plan names (prefetch and serialization edges), the
  copy-in worker reads the storage back; at most one restore is in flight, in plan
  order. A decompression runs at unpack, on the compute thread. A restore that was not
  started (a step that ran differently) is done at unpack, synchronously.
- **Release**: each restore knows how many unpacks the trace saw for it; after the last,
  the runtime drops its copy (autograd drops the views when the backward op is done).
- **A different step** (another op sequence, or a saved tensor of another shape or dtype)
  is detected at its first difference: from there on nothing more is reduced and
  nothing is prefetched (warning once); tensors already reduced are restored on demand,
  so values are never wrong.
"""

from __future__ import annotations

import concurrent.futures
import threading
import warnings
from collections import defaultdict
from typing import Any, Dict, List, Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ._trace import tensors_in

GROUP = 256


class PlanNotApplied(UserWarning):
    """A step differed from the traced one; the plan was not applied to the rest of it."""


# --- codecs: flat fp32 <-> compressed -------------------------------------------------


def compress(flat: torch.Tensor, codec: str) -> Any:
    if codec == "fp16":
        return flat.to(torch.float16)
    if codec == "bf16":
        return flat.to(torch.bfloat16)
    if codec == "fp24":
        # The high three bytes of each little-endian fp32 (the low mantissa byte dropped).
        return flat.view(torch.uint8).reshape(-1, 4)[:, 1:].contiguous()
    if codec == "int8":
        n = flat.numel()
        pad = (-n) % GROUP
        x = torch.nn.functional.pad(flat, (0, pad)).reshape(-1, GROUP)
        scale = x.abs().amax(dim=1, keepdim=True) / 127.0
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        q = torch.round(x / scale).clamp_(-127, 127).to(torch.int8)
        return (q, scale.to(torch.float32), n)
    raise ValueError(f"unknown codec {codec!r}")


def decompress(data: Any, codec: str, numel: int) -> torch.Tensor:
    if codec in ("fp16", "bf16"):
        return data.to(torch.float32)
    if codec == "fp24":
        out = torch.zeros(numel, 4, dtype=torch.uint8)
        out[:, 1:] = data.reshape(numel, 3)
        return out.view(torch.float32).reshape(-1)
    if codec == "int8":
        q, scale, n = data
        return (q.to(torch.float32) * scale).reshape(-1)[:n]
    raise ValueError(f"unknown codec {codec!r}")


def _as_bytes(data: Any) -> List[torch.Tensor]:
    """The tensors of a compressed form, as flat uint8 views (for the store)."""
    parts = list(data[:2]) if isinstance(data, tuple) else [data]
    return [p.contiguous().view(torch.uint8).reshape(-1) for p in parts]


# --- the runtime -----------------------------------------------------------------------


class _Restore:
    def __init__(self, spec: Dict[str, Any]) -> None:
        self.value: int = spec["value"]
        self.after_op: Optional[int] = spec["after_op"]
        self.readers: List[int] = spec["readers"]
        self.future: Optional[concurrent.futures.Future] = None
        self.storage: Optional[torch.Tensor] = None  # flat, full size, original dtype
        self.expected = 0
        self.seen = 0


class _Entry:
    """A reduced storage in this step."""

    def __init__(self, value: int, dtype: torch.dtype, nbytes: int) -> None:
        self.value = value
        self.dtype = dtype
        self.nbytes = nbytes
        self.reduced: Optional[concurrent.futures.Future] = None
        self.kept: Any = None  # compressed form kept in memory (codec without store)
        self.parts: List[tuple] = []  # store handles
        self.pending = 0  # restores still to serve their unpacks
        self.dropped = False


def _op_info(func: Any) -> tuple:
    """An op's name and whether a result aliases an argument (its schema's alias
    annotations: views and in-place ops), cached per op."""
    try:
        aliases = any(r.alias_info is not None for r in func._schema.returns)
    except AttributeError:
        aliases = True
    return str(func), aliases


_OP_INFO: Dict[Any, tuple] = {}


def _key(t: torch.Tensor) -> Optional[int]:
    try:
        return t.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):
        return None


class Runtime(TorchDispatchMode):
    def __init__(self, plan: Any, store_dir: Optional[str] = None) -> None:
        super().__init__()
        trace = plan.trace.data
        self.plan = plan
        self.op_names: List[str] = [op["name"] for op in trace["ops"]]
        self.packs: List[Dict[str, Any]] = trace["packs"]
        self.values = trace["values"]
        spec = plan.data
        self.codec: Optional[str] = plan.codec
        self.to_host: bool = spec["reduction"]["to_host"]
        self.recompute: bool = bool(spec["reduction"].get("recompute", False))
        # Recomputation: the producing op of each storage to re-make, by op index.
        self.recipe_at: Dict[int, int] = {}
        self.recipes: Dict[int, Any] = {}
        self.reduced_values = {r["value"] for r in spec["reduced"]}
        self.wait_before: Dict[int, List[int]] = defaultdict(list)
        for r in spec["reduced"]:
            for op in r["wait_before_ops"]:
                self.wait_before[op].append(r["value"])
            if self.recompute:
                producer = self.values[r["value"]]["producer"]
                self.recipe_at[producer] = r["value"]
        self.restores: Dict[int, List[_Restore]] = defaultdict(list)
        self.trigger_after: Dict[int, List[_Restore]] = defaultdict(list)
        for r in spec["restores"]:
            state = _Restore(r)
            self.restores[state.value].append(state)
            if state.after_op is not None:
                self.trigger_after[state.after_op].append(state)
        for states in self.restores.values():
            states.sort(key=lambda s: s.readers[0])
        # Each traced unpack goes to the restore whose readers it precedes.
        for u in trace["unpacks"]:
            value = self.packs[u["ordinal"]]["value"]
            state = self._restore_for(value, u["op"])
            if state is not None:
                state.expected += 1
        self.device = torch.device(trace.get("device", "cpu"))
        self.store = plan.store(store_dir) if self.to_host else None
        # On a GPU: copies out and back on their own streams (the two copy engines).
        self.cuda = self.device.type == "cuda"
        self.out_stream = torch.cuda.Stream(self.device) if self.cuda else None
        self.in_stream = torch.cuda.Stream(self.device) if self.cuda else None
        self.d2h, self.h2d = plan.workers()
        self.main = threading.get_ident()
        self.ops_run = 0
        self.pack_count = 0
        self.diverged: Optional[str] = None
        self.entries: Dict[int, _Entry] = {}
        self.produced: set = set()
        self.busy = False
        self.stats = {"reduced": 0, "restored_prefetch": 0, "restored_on_demand": 0}

    # -- plan lookups

    def _restore_for(self, value: int, op: int) -> Optional[_Restore]:
        states = self.restores.get(value)
        if not states:
            return None
        for s in states:
            if s.readers[-1] >= op:
                return s
        return states[-1]

    def _diverge(self, why: str) -> None:
        if self.diverged is None:
            self.diverged = why
            warnings.warn(
                f"memplan.torch: this step differs from the traced one ({why}); the plan is "
                "not applied to the rest of it (tensors already reduced are restored on "
                "demand, values stay exact). Trace this step again to plan it.",
                PlanNotApplied,
                stacklevel=3,
            )

    # -- op counting

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        if self.busy or threading.get_ident() != self.main:
            return func(*args, **kwargs)
        i = self.ops_run
        info = _OP_INFO.get(func)
        if info is None:
            info = _OP_INFO[func] = _op_info(func)
        name, aliases = info
        if self.diverged is None:
            if i >= len(self.op_names):
                self._diverge(f"more than the {len(self.op_names)} traced ops")
            elif name != self.op_names[i]:
                self._diverge(f"op {i} is {name}, the trace has {self.op_names[i]}")
        waits = self.wait_before.get(i)
        if waits:
            for value in waits:
                entry = self.entries.get(value)
                if entry is not None and entry.reduced is not None:
                    entry.reduced.result()
        out = func(*args, **kwargs)
        self.ops_run = i + 1
        if isinstance(out, torch.Tensor):
            outs: Any = (out,)
        elif isinstance(out, (tuple, list)):
            outs = [t for t in out if isinstance(t, torch.Tensor)]
        else:
            outs = tensors_in(out)
        if i in self.recipe_at and self.diverged is None:
            # The op, its arguments (kept alive until the storage is re-made, as the
            # plan counts) and its outputs' storages.
            self.recipes[self.recipe_at[i]] = (func, args, kwargs, [_key(t) for t in outs])
        if not aliases:
            # Its outputs are new storages (an op whose schema says a result aliases an
            # argument, a view or an in-place op, makes none).
            for t in outs:
                key = _key(t)
                if key is not None:
                    self.produced.add(key)
        if self.diverged is None:
            triggered = self.trigger_after.get(i)
            if triggered:
                for state in triggered:
                    self._start_restore(state)
        return out

    # -- reduce

    def pack(self, t: torch.Tensor) -> Any:
        if self.busy:
            return ("plain", t)
        # The hook's own tensor work is not the step's: the op counter skips it.
        self.busy = True
        try:
            return self._pack(t)
        finally:
            self.busy = False

    def _pack(self, t: torch.Tensor) -> Any:
        ordinal = self.pack_count
        key = None
        try:
            key = t.untyped_storage()._cdata
        except (RuntimeError, NotImplementedError):
            return ("plain", t)
        traced = self.packs[ordinal] if ordinal < len(self.packs) else None
        # Parameters and inputs are not counted as packs in the trace: skip them the same
        # way (they were alive before the step).
        if self._external(t, key):
            return ("plain", t)
        self.pack_count += 1
        if self.diverged is None:
            if traced is None:
                self._diverge(f"more saved tensors than the {len(self.packs)} traced")
            elif (
                list(t.shape) != traced["shape"]
                or str(t.dtype).replace("torch.", "") != traced["dtype"]
                or int(t.untyped_storage().nbytes()) != traced["bytes"]
            ):
                self._diverge(
                    f"saved tensor {ordinal} is {list(t.shape)} {t.dtype}, the trace has "
                    f"{traced['shape']} {traced['dtype']}"
                )
        if self.diverged is not None or traced is None:
            return ("plain", t)
        value = traced["value"]
        if value not in self.reduced_values:
            return ("plain", t)
        if self.store is None and t.dtype != torch.float32:
            return ("plain", t)  # a codec alone reduces fp32 only (the plan knows)
        entry = self.entries.get(value)
        if entry is None and self.recompute:
            recipe = self.recipes.get(value)
            if recipe is None or t.untyped_storage()._cdata not in recipe[3]:
                self._diverge(f"saved tensor {ordinal} was not made by the op the trace names")
                return ("plain", t)
        if entry is None:
            entry = self._reduce(value, t)
            entry.pending = sum(1 for r in self.restores.get(value, ()) if r.expected > 0)
        meta = (value, tuple(t.shape), tuple(t.stride()), int(t.storage_offset()), t.dtype)
        return ("reduced", ordinal, meta)

    def _external(self, t: torch.Tensor, key: int) -> bool:
        # As in the trace: a storage no op of this step produced (a parameter, a buffer,
        # an input) is never a candidate.
        return key not in self.produced

    def _reduce(self, value: int, t: torch.Tensor) -> _Entry:
        storage = t.untyped_storage()
        dtype = t.dtype
        entry = _Entry(value, dtype, int(storage.nbytes()))
        self.entries[value] = entry
        self.stats["reduced"] += 1
        if self.recompute:
            func, args, kwargs, keys = self.recipes.pop(value)
            entry.kept = (func, args, kwargs, keys.index(storage._cdata))
            return entry
        flat = torch.empty(0, dtype=dtype, device=t.device).set_(storage)
        codec = self.codec if dtype == torch.float32 else None
        if codec is None:
            parts = [flat.view(torch.uint8).reshape(-1)]
        else:
            data = compress(flat, codec)
            if not self.to_host:
                entry.kept = data
                return entry
            if codec == "int8":
                # The codes go to the store; the scales (1/256 of them) stay here.
                q, scale, n = data
                entry.kept = (None, scale, n)
                parts = [q.view(torch.uint8).reshape(-1)]
            else:
                parts = [data.view(torch.uint8).reshape(-1)]
            del data
        del flat, storage
        store = self.store
        assert store is not None
        ready = None
        if self.cuda:
            # The copy waits, on the side stream, for the compute stream to finish it.
            ready = torch.cuda.Event()
            ready.record()

        def write(parts: List[torch.Tensor] = parts) -> None:
            entry.parts = [store.put(p, self.out_stream, ready) for p in parts]
            parts.clear()

        entry.reduced = self.d2h.submit(write)
        del parts
        return entry

    # -- restore

    def _read(self, entry: _Entry) -> Any:
        """The reduced form read back: ``(data, events)``; on a GPU the reader's stream
        must wait for the events (the copies ran on a side stream)."""
        if entry.dropped:
            raise RuntimeError(
                f"memplan.torch: storage {entry.value} of the trace was unpacked more often "
                "than in the traced step (a second backward, or retain_graph=True?), after "
                "its reduced copy was released; trace that step and plan it"
            )
        if entry.reduced is not None:
            entry.reduced.result()
        if self.recompute:
            func, args, kwargs, index = entry.kept
            return tensors_in(func(*args, **kwargs))[index], []
        if self.store is None:
            return entry.kept, []
        events = []
        raw = []
        for h in entry.parts:
            got = self.store.get(h, h[1], self.in_stream)
            if isinstance(got, tuple):
                raw.append(got[0])
                events.append(got[1])
            else:
                raw.append(got)
        if self.codec is None or entry.dtype != torch.float32:
            return raw[0], events
        if self.codec in ("fp16", "bf16"):
            dt = torch.float16 if self.codec == "fp16" else torch.bfloat16
            return raw[0].view(dt), events
        if self.codec == "fp24":
            return raw[0], events
        _, scale, n = entry.kept
        return (raw[0].view(torch.int8).reshape(-1, GROUP), scale, n), events

    def _start_restore(self, state: _Restore) -> None:
        entry = self.entries.get(state.value)
        if entry is None or state.expected == 0 or entry.dropped:
            return
        if state.future is not None or state.storage is not None:
            return
        if self.store is None:
            return  # decompression only: done at unpack, on the compute thread
        state.future = self.h2d.submit(self._read, entry)
        self.stats["restored_prefetch"] += 1

    def unpack(self, packed: Any) -> torch.Tensor:
        if packed[0] == "plain":
            return packed[1]
        self.busy = True
        try:
            return self._unpack(packed)
        finally:
            self.busy = False

    def _unpack(self, packed: Any) -> torch.Tensor:
        _, ordinal, (value, shape, stride, offset, dtype) = packed
        entry = self.entries[value]
        state = None if self.diverged else self._restore_for(value, self.ops_run)
        storage = state.storage if state is not None else None
        if storage is None:
            if state is not None and state.future is not None:
                data, events = state.future.result()
            else:
                data, events = self._read(entry)
                self.stats["restored_on_demand"] += 1
            if self.cuda:
                stream = torch.cuda.current_stream()
                for event in events:
                    stream.wait_event(event)
                for t in data if isinstance(data, tuple) else (data,):
                    if isinstance(t, torch.Tensor) and t.is_cuda:
                        t.record_stream(stream)
            storage = self._full(entry, data)
            if state is not None:
                state.future = None
                state.storage = storage
        out = torch.empty(0, dtype=dtype, device=storage.device)
        out.set_(storage.untyped_storage(), offset, shape, stride)
        if state is not None:
            state.seen += 1
            if state.seen == state.expected:
                state.storage = None
                entry.pending -= 1
                if entry.pending == 0 and self.diverged is None:
                    self._drop(entry)
        return out

    def _drop(self, entry: _Entry) -> None:
        """Every planned restore of the storage has served its unpacks: its reduced
        copy (compressed in memory, or in the store) is released."""
        entry.dropped = True
        entry.kept = None
        if self.store is not None:
            for handle in entry.parts:
                self.store.release(handle)
        entry.parts = []

    def _full(self, entry: _Entry, data: Any) -> torch.Tensor:
        """The storage's bytes as a flat tensor of its dtype."""
        if self.recompute:
            return torch.empty(0, dtype=entry.dtype, device=data.device).set_(data.untyped_storage())
        if self.codec is not None and entry.dtype == torch.float32:
            return decompress(data, self.codec, entry.nbytes // 4)
        return data.view(entry.dtype)

    def close(self) -> None:
        # The plan keeps its workers for the next step: wait for this step's copies.
        for entry in self.entries.values():
            if entry.reduced is not None:
                entry.reduced.exception()
        for states in self.restores.values():
            for state in states:
                if state.future is not None:
                    state.future.exception()
                    state.future = None
        # The plan keeps the store for its next step; this step's ranges go back to it.
        if self.store is not None:
            for entry in self.entries.values():
                for handle in entry.parts:
                    self.store.release(handle)
                entry.parts = []
        self.entries.clear()


class apply:  # noqa: N801 - used as a context manager, like torch.no_grad
    """Applies a :class:`Plan` to the training step run inside the block::

        with memplan.torch.apply(plan):
            loss_fn(model(x), y).backward()

    One block is one step (forward and backward). The block's runtime (``as rt``) has
    ``stats`` and ``diverged`` (why the step differed from the trace, or ``None``).
    """

    def __init__(self, plan: Any, store_dir: Optional[str] = None) -> None:
        self.plan = plan
        self.store_dir = store_dir
        self.runtime: Optional[Runtime] = None
        self._hooks: Any = None

    def __enter__(self) -> Runtime:
        rt = Runtime(self.plan, self.store_dir)
        self.runtime = rt
        self._hooks = torch.autograd.graph.saved_tensors_hooks(rt.pack, rt.unpack)
        self._hooks.__enter__()
        rt.__enter__()
        return rt

    def __exit__(self, *exc: Any) -> None:
        rt = self.runtime
        assert rt is not None
        try:
            rt.__exit__(*exc)
        finally:
            self._hooks.__exit__(*exc)
            rt.close()
