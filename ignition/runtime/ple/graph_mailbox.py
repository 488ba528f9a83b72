"""The in-graph mailbox's host side, and the mapped (UVA) host memory it and the gather use."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import torch

from ignition.runtime.ple.mailbox import Readiness
from ignition.runtime.ple.store import RowStore, raw_dtype

DEFAULT_MAX_SPINS = 200_000_000  # ~ minutes of PCIe polls: a dead host thread, not a slow one
POLL_S = 20e-6


class _CudaArrayView:
    """The ``__cuda_array_interface__`` of a pinned tensor's bytes (keeps it alive)."""

    def __init__(self, host: torch.Tensor) -> None:
        self.host = host
        self.__cuda_array_interface__ = {
            "shape": (host.numel() * host.element_size(),),
            "typestr": "|u1",
            "data": (host.data_ptr(), False),
            "version": 3,
            "strides": None,
            "stream": None,
        }


def device_view(host: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``host`` (contiguous; pinned on CUDA) as a tensor on ``device`` over the same memory."""
    if device.type != "cuda":
        return host
    if not host.is_pinned() or not host.is_contiguous():
        raise ValueError("device_view: the host tensor must be pinned and contiguous")
    raw = torch.as_tensor(_CudaArrayView(host), device=device)
    return raw.view(host.dtype).view(host.shape)


def mapped_empty(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A host tensor the device can address (pinned on CUDA, plain on CPU), zeroed."""
    host = torch.zeros(shape, dtype=dtype)
    return host.pin_memory() if device.type == "cuda" else host


def uva_table(store: RowStore, device: torch.device) -> torch.Tensor | None:
    """The preloaded table as the program's device sees it (None: the store holds no copy)."""
    preloaded = getattr(store, "preloaded", None)
    return None if preloaded is None else device_view(preloaded, device)


class GraphMailbox:
    """Mapped buffers for ``capacity`` ids and one host thread answering the program."""

    def __init__(
        self,
        store: RowStore,
        capacity: int,
        device: torch.device,
        clock: Callable[[], int] = time.perf_counter_ns,
        delay_s: float = 0.0,
        max_spins: int = DEFAULT_MAX_SPINS,
    ) -> None:
        layout = store.layout
        self.store, self.device, self.clock = store, device, clock
        self.delay_s, self.max_spins = delay_s, max_spins
        self.ids = mapped_empty((capacity,), torch.int64, device)
        self.request = mapped_empty((2,), torch.int64, device)  # (sequence asked, ids)
        self.ready = mapped_empty((1,), torch.int64, device)  # last sequence staged
        self.rows = mapped_empty((capacity, layout.row_width), layout.dtype, device)
        self.views = [device_view(t, device) for t in (self.ids, self.request, self.ready,
                                                       self.rows)]  # fmt: skip
        self.sequence = torch.zeros(1, dtype=torch.int64, device=device)
        self.status = torch.zeros(1, dtype=torch.int32, device=device)
        self._answered: list[Readiness] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.error: BaseException | None = None
        # the sequence answered last, read before the thread starts: a program may ask first
        answered = int(self.request[0])
        self._thread = threading.Thread(target=self._serve, args=(answered,),
                                        name="ple-graph-mailbox", daemon=True)  # fmt: skip
        self._thread.start()

    def ask(self, row_ids: torch.Tensor) -> torch.Tensor:
        """Inside the program: publish ``row_ids``, wait for the host, return the staged rows."""
        from ignition.kernels import ops

        ids, request, ready, rows = self.views
        ops.publish_and_wait(row_ids, ids, request, ready, self.sequence, self.status,
                             self.max_spins)  # fmt: skip
        return rows[: row_ids.shape[0]]

    def take_readiness(self) -> tuple[Readiness, ...]:
        """The requests answered since the last call (the frame that just completed)."""
        with self._lock:
            taken, self._answered = tuple(self._answered), []
        return taken

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)

    def _serve(self, last: int) -> None:
        while not self._stop.is_set():
            asked = int(self.request[0])  # a fresh read of host memory the device writes
            if asked == last:
                time.sleep(POLL_S)
                continue
            seen_ns = self.clock()
            try:
                self._stage(int(self.request[1]))
            except BaseException as err:  # the program times out; the worker reports it
                self.error = err
                continue
            if self.delay_s:
                time.sleep(self.delay_s)
            ready_ns = self.clock()
            # recorded before the flag is written: the program may finish, and its caller
            # take the frame's readiness, the moment the flag is seen
            with self._lock:
                self._answered.append(Readiness(seen_ns, ready_ns, seen_ns, ready_ns))
            self.ready[0] = asked
            last = asked

    def _stage(self, num_ids: int) -> None:
        """The asked rows at their positions, padding rows zero (moved as raw bytes)."""
        ids = self.ids[:num_ids].clone()
        is_row = ids >= 0
        rows = self.rows.view(raw_dtype(self.rows.dtype))
        gathered = torch.empty(int(is_row.sum()), rows.shape[1], dtype=self.rows.dtype)
        if gathered.shape[0]:
            self.store.gather(ids[is_row], gathered)
        staged = rows[:num_ids]
        staged.zero_()
        staged[is_row] = gathered.view(rows.dtype)
