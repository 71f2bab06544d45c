"""Hooks into memplan's preloadable pool (``LD_PRELOAD=libmemplan_preload.so``).

The pool finds a training loop's iterations from its requests by itself; a training script
can also mark them explicitly::

    import memplan.pool
    for batch in loader:
        ...
        optimizer.step()
        memplan.pool.step()          # a no-op when the pool is not preloaded

Without the preloaded library every function here does nothing and ``active()`` is False.
"""

from __future__ import annotations

import ctypes
from typing import Optional

__all__ = ["active", "step", "summary"]


def _library() -> Optional[ctypes.CDLL]:
    process = ctypes.CDLL(None)
    if not hasattr(process, "memplan_pool_step"):  # the pool is not preloaded
        return None
    process.memplan_pool_step.restype = None
    process.memplan_pool_active.restype = ctypes.c_int
    process.memplan_pool_summary.restype = ctypes.c_size_t
    process.memplan_pool_summary.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    return process


_LIB = _library()


def active() -> bool:
    """True when the pool is preloaded into this process and switched on."""
    return _LIB is not None and bool(_LIB.memplan_pool_active())


def step() -> None:
    """Marks the end of a training iteration (two identical marked iterations train the
    plan). Does nothing without the preloaded pool."""
    if _LIB is not None:
        _LIB.memplan_pool_step()


def summary() -> str:
    """The pool's counters (requests, hits, arena), or "" without the preloaded pool."""
    if _LIB is None:
        return ""
    buf = ctypes.create_string_buffer(1024)
    _LIB.memplan_pool_summary(buf, len(buf))
    return buf.value.decode()
