"""memplan: static memory planning for neural-network tensors.

Give memplan buffers with sizes and lifetimes (a :class:`Problem`), and
:func:`plan` gives every buffer an offset in one arena so that buffers live at the
same time never share bytes, with the arena as small as it can make it. Every plan is
checked by an independent checker (:func:`check`), and reported against a lower bound.

>>> import memplan
>>> problem = memplan.Problem([
...     memplan.Buffer("a", 1024, 0, 2),
...     memplan.Buffer("b", 512, 1, 3),
...     memplan.Buffer("c", 1024, 2, 4),
... ])
>>> result = memplan.plan(problem)
>>> result.arena, result.lower_bound
(1536, 1536)
>>> memplan.check(problem, result)
[]

ExecuTorch users switch memplan on with one line; see :mod:`memplan.executorch`.
"""

from __future__ import annotations

import os
from typing import Any, Optional, Union

from ._memplan import (
    Buffer,
    FormatError,
    InputError,
    MemplanError,
    ModelError,
    PlanningError,
    PlanResult,
    Problem,
    Violation,
    check,
    load_onnx,
    load_tflite,
    plan,
    plan_file,
    planners,
    read_plan,
)
from ._memplan import __version__ as __version__

__all__ = [
    "Buffer",
    "FormatError",
    "InputError",
    "MemplanError",
    "ModelError",
    "PlanningError",
    "PlanResult",
    "Problem",
    "Violation",
    "check",
    "from_table",
    "load_onnx",
    "load_tflite",
    "plan",
    "plan_file",
    "planners",
    "read_csv",
    "read_plan",
]

# Column names accepted by from_table, first match wins.
_COLUMNS = {
    "size": ("size", "bytes"),
    "start": ("start", "lower", "first"),
    "end": ("end", "upper"),
    "name": ("name", "id"),
    "alignment": ("alignment",),
    "offset": ("offset", "fixed_offset"),
}


def _column(table: Any, key: str, required: bool) -> Optional[list]:
    for candidate in _COLUMNS[key]:
        try:
            values = table[candidate]
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        tolist = getattr(values, "tolist", None)
        return list(tolist() if callable(tolist) else values)
    if required:
        raise InputError(
            f"the table has no {key!r} column (accepted names: {', '.join(_COLUMNS[key])})"
        )
    return None


def from_table(table: Any) -> Problem:
    """A problem from a table: a pandas/polars DataFrame, a dict of columns, or any object
    whose ``table[column]`` gives a sequence. Columns: ``size``; ``start`` (or
    ``lower``); ``end`` (or ``upper``, exclusive); optional ``name`` (or ``id``),
    ``alignment`` and ``offset`` (a fixed offset; NaN/None for free buffers)."""
    sizes = _column(table, "size", True)
    starts = _column(table, "start", True)
    ends = _column(table, "end", True)
    names = _column(table, "name", False)
    alignments = _column(table, "alignment", False)
    offsets = _column(table, "offset", False)
    if offsets is not None:
        offsets = [None if o is None or o != o else int(o) for o in offsets]
    return Problem.from_lists(
        [int(s) for s in sizes],
        [int(s) for s in starts],
        [int(e) for e in ends],
        names=None if names is None else [str(n) for n in names],
        alignments=None if alignments is None else [int(a) for a in alignments],
        offsets=offsets,
    )


# The most bytes read_csv reads: the CLI's cap on text inputs (1 GiB).
_MAX_TEXT_BYTES = 1 << 30


def read_csv(path: Union[str, "os.PathLike[str]"]) -> Problem:
    """Reads a minimalloc CSV file (``id,lower,upper,size[,alignment,offset,…]``). A file
    that cannot be opened raises the built-in :class:`OSError` (``FileNotFoundError``,
    …); one that is not UTF-8 text, holds a NUL byte, is larger than 1 GiB or is not a
    valid CSV, :class:`FormatError` (``/dev/zero`` fails at its first byte, a huge file
    before it is read)."""
    name = os.fspath(path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > _MAX_TEXT_BYTES:
            raise FormatError(
                f"{name!s} is larger than {_MAX_TEXT_BYTES} bytes, the most memplan reads "
                "from one input; check that this is the file you meant"
            )
        chunks = []
        total = 0
        while True:
            chunk = f.read(1 << 16)
            if not chunk:
                break
            nul = chunk.find(b"\0")
            if nul >= 0:
                raise FormatError(
                    f"{name!s}: not UTF-8 text (a NUL byte at byte {total + nul})"
                )
            total += len(chunk)
            if total > _MAX_TEXT_BYTES:
                raise FormatError(
                    f"{name!s} is larger than {_MAX_TEXT_BYTES} bytes, the most memplan "
                    "reads from one input"
                )
            chunks.append(chunk)
    data = b"".join(chunks)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FormatError(
            f"{name!s}: not UTF-8 text ({error.reason} at byte {error.start})"
        ) from None
    # Universal newlines, as a text-mode open() reads them.
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return Problem.from_csv(text, str(name))
