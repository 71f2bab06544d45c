"""Where reduced tensors go: host memory that is not the device's.

On a CPU the "device" is the process's own memory, so the store is a file (unlinked at
once, so nothing is left behind even on a crash): its pages live in the kernel's page
cache, outside the process. On a GPU it is pinned host memory.
"""

from __future__ import annotations

import os
import tempfile
import threading
from typing import Any, Optional, Tuple

import torch


class HostStore:
    """Append-only byte store. ``put`` takes a flat ``uint8`` tensor and returns a handle;
    ``get`` reads it back into a new ``uint8`` tensor on ``device``."""

    def __init__(self, device: torch.device, directory: Optional[str] = None) -> None:
        self.device = torch.device(device)
        self.lock = threading.Lock()
        self.fd = -1
        self.end = 0
        self.free: list = []
        if self.device.type == "cpu":
            fd, path = tempfile.mkstemp(prefix="memplan-store-", dir=directory)
            os.unlink(path)
            self.fd = fd

    def put(
        self, data: torch.Tensor, stream: Any = None, ready: Any = None
    ) -> Tuple[int, int, Optional[torch.Tensor]]:
        """Stores `data`. On a GPU the copy runs on `stream` (a side stream) after the
        event `ready` (recorded on the compute stream when the tensor was complete),
        and returns once it is done, so that the caller may drop the device tensor."""
        n = data.numel()
        if self.device.type != "cpu":
            host = torch.empty(n, dtype=torch.uint8, pin_memory=True)
            if stream is None:
                host.copy_(data)
                return (0, n, host)
            with torch.cuda.stream(stream):
                if ready is not None:
                    stream.wait_event(ready)
                host.copy_(data, non_blocking=True)
                done = torch.cuda.Event()
                done.record(stream)
            done.synchronize()
            return (0, n, host)
        with self.lock:
            offset = self._reserve(n)
        view = memoryview(data.numpy()).cast("B")
        done = 0
        while done < n:
            done += os.pwrite(self.fd, view[done:], offset + done)
        return (offset, n, None)

    def _reserve(self, n: int) -> int:
        # First fit over freed ranges, so a long run reuses the file's space.
        for i, (off, size) in enumerate(self.free):
            if size >= n:
                if size == n:
                    self.free.pop(i)
                else:
                    self.free[i] = (off + n, size - n)
                return off
        off = self.end
        self.end += n
        return off

    def get(
        self, handle: Tuple[int, int, Optional[torch.Tensor]], n: int, stream: Any = None
    ) -> Any:
        """Reads a stored tensor back. On a GPU with `stream`: ``(tensor, event)``, the
        copy running on `stream`; the reader's stream must wait for `event`."""
        offset, size, host = handle
        if host is not None:
            if stream is None:
                return host.to(self.device)
            with torch.cuda.stream(stream):
                out = host.to(self.device, non_blocking=True)
                done = torch.cuda.Event()
                done.record(stream)
            return (out, done)
        out = torch.empty(size, dtype=torch.uint8)
        view = memoryview(out.numpy()).cast("B")
        done = 0
        while done < size:
            got = os.preadv(self.fd, [view[done:]], offset + done)
            if got <= 0:
                raise OSError(f"memplan store: short read at {offset + done}")
            done += got
        return out

    def release(self, handle: Tuple[int, int, Optional[torch.Tensor]]) -> None:
        offset, size, host = handle
        if host is None and size:
            with self.lock:
                self.free.append((offset, size))

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
