"""Host staging for frame inputs: fill on the host, upload each buffer once per frame.

The worker writes rows into host mirrors (numpy views; pinned on CUDA), and
:meth:`HostStaging.upload` issues one stream-ordered copy per bound buffer. Two sets
alternate with the engine's two-frame queue. A :class:`HostMirror` (the page table) is
that tensor's only writer. Details: docs/compiler.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ignition.compiler.buffers import BUFFERS, Uploads
from ignition.compiler.workspace import Workspace

NUM_STAGING_SETS = 2  # the engine queues at most two frames


class HostMirror:
    """The host master copy of one device tensor; edit ``array``, then ``mark_dirty``."""

    def __init__(self, device_tensor: Tensor) -> None:
        self.device_tensor = device_tensor
        self.array: np.ndarray = device_tensor.detach().cpu().numpy().copy()
        self.is_dirty = False

    def mark_dirty(self) -> None:
        self.is_dirty = True

    def sync(self) -> None:
        """Write a changed master copy to the device now (blocking, stream-ordered), for
        state operations, which run with no frame in flight."""
        if self.is_dirty:
            self.device_tensor.copy_(torch.from_numpy(self.array))
            self.is_dirty = False


@dataclass
class HostFrame:
    """One frame's host-side inputs: ``arrays[name]`` is a writable numpy view of a staging
    buffer, already reset to padding over the prefixes the program binds."""

    uploads: Uploads
    arrays: dict[str, np.ndarray]
    host: dict[str, Tensor]
    set_index: int
    # Gated buffers (BufferSpec.is_gated): the prefix this frame wrote and uploads.
    written: dict[str, int] = field(default_factory=dict)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name]

    def write_gated(self, name: str, end: int) -> None:
        """The frame wrote a gated buffer up to ``end``: that prefix is uploaded."""
        self.written[name] = max(self.written.get(name, 0), end)


def stage_prompt_chunk(
    frame: HostFrame,
    lane_capacity: int,
    is_round: bool,
    lane: int,
    row: int,
    offset: int,
    chunk: Sequence[int],
) -> int:
    """Stage one prompt lane's chunk (lane-major in round programs, packed from ``offset``
    otherwise); returns the packed tokens it adds."""
    if is_round:
        first = lane * lane_capacity
        frame["prompt_length"][lane] = len(chunk)
        frame["prompt_tokens"][first : first + len(chunk)] = chunk
        return 0
    frame["query_lens"][row] = len(chunk)
    frame["token_ids"][offset : offset + len(chunk)] = chunk
    return len(chunk)


class HostStaging:
    """Double-buffered host mirrors of one workspace's buffers."""

    def __init__(
        self,
        workspace: Workspace,
        mirrors: dict[str, Tensor] | None = None,
        num_sets: int = NUM_STAGING_SETS,
    ) -> None:
        self.workspace = workspace
        self.is_cuda = workspace.device.type == "cuda"
        self.mirrors = {name: HostMirror(t) for name, t in (mirrors or {}).items()}
        targets = {**workspace.buffers, **{n: m.device_tensor for n, m in self.mirrors.items()}}
        self._sets: list[dict[str, Tensor]] = []
        self._arrays: list[dict[str, np.ndarray]] = []
        for _ in range(num_sets):
            host = {
                name: torch.empty(buf.shape, dtype=buf.dtype, pin_memory=self.is_cuda)
                for name, buf in targets.items()
            }
            self._sets.append(host)
            self._arrays.append({name: t.numpy() for name, t in host.items()})
        self._copied: list[Any] = [None] * num_sets  # CUDA event after each set's copies
        self._next = 0
        self.num_uploads = 0  # copies issued, for tests and benchmarks

    def begin(self, uploads: Uploads) -> HostFrame:
        """The next staging set, reset to padding over ``uploads``, safe to write."""
        index = self._next
        self._next = (index + 1) % len(self._sets)
        copied = self._copied[index]
        if copied is not None and not copied.query():  # in steady state long complete
            copied.synchronize()  # the copies of two frames ago
        self._copied[index] = None
        arrays = self._arrays[index]
        for name, n in uploads:
            if not BUFFERS[name].is_gated:  # gated: stale values are never read
                arrays[name][:n] = BUFFERS[name].padding
        return HostFrame(uploads, arrays, self._sets[index], index)

    def upload(self, frame: HostFrame) -> None:
        """One copy per bound buffer, host staging -> workspace, and one per changed mirror
        (asynchronous on CUDA)."""
        buffers = self.workspace.buffers
        for name, n in frame.uploads:
            if BUFFERS[name].is_gated:
                n = min(n, frame.written.get(name, 0))
                if not n:
                    continue
            buffers[name][:n].copy_(frame.host[name][:n], non_blocking=self.is_cuda)
        self.num_uploads += len(frame.uploads)
        for name, mirror in self.mirrors.items():
            if mirror.is_dirty:
                np.copyto(frame.arrays[name], mirror.array)
                mirror.device_tensor.copy_(frame.host[name], non_blocking=self.is_cuda)
                mirror.is_dirty = False
                self.num_uploads += 1
        if self.is_cuda:
            event = torch.cuda.Event()
            event.record()
            self._copied[frame.set_index] = event
