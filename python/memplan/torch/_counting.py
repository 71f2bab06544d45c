"""The counting CPU allocator: exact live tensor bytes of a PyTorch process.

Built on first use from ``_counting.cpp`` with :mod:`torch.utils.cpp_extension` (needs a
C++ compiler and ``ninja``), cached under ``TORCH_EXTENSIONS_DIR``. While installed,
every CPU tensor allocation is counted; tensors allocated before stay with the allocator
that made them (their memory is not counted).
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Iterator, Optional

_module: Optional[Any] = None
_lock = threading.Lock()


class AllocatorUnavailable(RuntimeError):
    """The counting allocator could not be built (no C++ compiler or no ``ninja``)."""


def module() -> Any:
    """The built extension (built once per process, then cached on disk)."""
    global _module
    with _lock:
        if _module is None:
            try:
                from torch.utils.cpp_extension import load
            except ImportError as error:  # pragma: no cover - torch is there
                raise AllocatorUnavailable(f"torch.utils.cpp_extension: {error}") from None
            _ninja_on_path()
            source = os.path.join(os.path.dirname(__file__), "_counting.cpp")
            try:
                _module = load(name="memplan_counting_v2", sources=[source], verbose=False)
            except (RuntimeError, OSError, ImportError) as error:
                raise AllocatorUnavailable(
                    "memplan.torch measures tensor bytes with a small C++ extension, and "
                    f"building it failed: {error}. It needs a C++ compiler (g++ or clang++) "
                    "and ninja (pip install ninja)."
                ) from None
        return _module


def _ninja_on_path() -> None:
    """torch looks for ``ninja`` on PATH; the pip package puts it beside the
    interpreter, which is not on PATH when a venv's python is run directly."""
    try:
        import ninja  # type: ignore[import-not-found]

        bin_dir = getattr(ninja, "BIN_DIR", None)
    except ImportError:
        return
    if bin_dir and bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")


@contextlib.contextmanager
def counting() -> Iterator[Any]:
    """Installs the counting allocator for the block (nesting is fine: only the outermost
    installs and uninstalls); yields the extension (``live()``, ``peak()``,
    ``reset_peak()``, ``allocations()``)."""
    m = module()
    owner = not m.installed()
    if owner:
        m.install()
    try:
        yield m
    finally:
        if owner:
            m.uninstall()
