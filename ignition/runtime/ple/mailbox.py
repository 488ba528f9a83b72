"""The PLE mailbox: a host thread that resolves published row ids into staging buffers."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from ignition.runtime.ple.store import RowStore

# Staging buffers: two frames in flight, each with its known rows and a draft step.
DEFAULT_NUM_STAGING = 4


@dataclass
class Readiness:
    """One delivery's timestamps (ns on the mailbox clock; 0 = not yet)."""

    requested_ns: int = 0  # row ids published
    ready_ns: int = 0  # rows staged
    needed_ns: int = 0  # the consumer started waiting for them
    consumed_ns: int = 0  # the consumer has them

    @property
    def exposed_ns(self) -> int:
        """The delay the consumer saw: staging that ended before it was needed is free."""
        return max(0, self.ready_ns - self.needed_ns)


def frame_exposed_ns(readiness: Sequence[Readiness]) -> int:
    """A frame's exposed delay: its deliveries wait one after another, so they add."""
    return sum(r.exposed_ns for r in readiness)


def aggregate_exposed_ns(ranks: Sequence[Sequence[Readiness]]) -> int:
    """A tensor-parallel frame's exposed delay: the time at least one rank was stalled."""
    windows = sorted(
        (r.needed_ns, r.ready_ns) for rank in ranks for r in rank if r.ready_ns > r.needed_ns
    )
    total, end = 0, None
    for start, stop in windows:
        if end is None or start > end:
            total, end = total + stop - start, stop
        elif stop > end:
            total, end = total + stop - end, stop
    return total


@dataclass
class Delivery:
    row_ids: torch.Tensor  # [*shape] int64
    rows: torch.Tensor  # staging view [*shape, row_width], valid once ready
    slot: int
    readiness: Readiness = field(default_factory=Readiness)
    error: BaseException | None = None
    parts: tuple[int, ...] = ()  # rows per PLE layer, when several layers share a delivery
    done: threading.Event = field(default_factory=threading.Event)


class Mailbox:
    """One host worker thread over a row store and ``num_staging`` reusable buffers."""

    def __init__(
        self,
        store: RowStore,
        num_staging: int = DEFAULT_NUM_STAGING,
        clock: Callable[[], int] = time.perf_counter_ns,
        pin: bool = False,
    ) -> None:
        self.store = store
        self.clock = clock
        self._pin = pin
        layout = store.layout
        self._staging = [torch.empty(0, layout.row_width, dtype=layout.dtype)] * num_staging
        self._free = list(range(num_staging - 1, -1, -1))
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[Delivery | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="ple-mailbox", daemon=True)
        self._thread.start()

    def publish(self, row_ids: torch.Tensor) -> Delivery:
        """Hand ``row_ids`` to the host thread; returns at once."""
        n = row_ids.numel()
        with self._lock:
            if not self._free:
                raise RuntimeError("PLE mailbox: every staging buffer is held (release them)")
            slot = self._free.pop()
            if len(self._staging[slot]) < n:  # grows to the widest frame, then is reused
                width, dtype = self.store.layout.row_width, self.store.layout.dtype
                buffer = torch.empty(n, width, dtype=dtype)
                self._staging[slot] = buffer.pin_memory() if self._pin else buffer
        rows = self._staging[slot][:n].view(*row_ids.shape, -1)
        delivery = Delivery(row_ids, rows, slot)
        delivery.readiness.requested_ns = self.clock()
        self._queue.put(delivery)
        return delivery

    def wait(self, delivery: Delivery) -> torch.Tensor:
        """Block until the rows are staged; records when they were needed and consumed."""
        delivery.readiness.needed_ns = self.clock()
        delivery.done.wait()
        delivery.readiness.consumed_ns = self.clock()
        if delivery.error is not None:
            raise RuntimeError(f"PLE delivery failed: {delivery.error}") from delivery.error
        return delivery.rows

    def release(self, delivery: Delivery) -> None:
        """The consumer is done with the staging buffer (its frame completed)."""
        with self._lock:
            self._free.append(delivery.slot)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=5.0)

    def _serve(self) -> None:
        while (delivery := self._queue.get()) is not None:
            try:
                self.store.gather(delivery.row_ids, delivery.rows)
            except BaseException as err:  # reported to the waiting consumer
                delivery.error = err
            delivery.readiness.ready_ns = self.clock()
            delivery.done.set()
