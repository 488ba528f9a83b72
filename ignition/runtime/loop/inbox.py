"""The engine's inbox: where the HTTP threads hand the loop arrivals and cancellations."""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable

from ignition.runtime.requests.errors import EngineStoppedError, QueueFullError
from ignition.runtime.requests.request import GenerationRequest
from ignition.runtime.requests.table import RequestTable, Sink


class Inbox:
    def __init__(
        self, table: RequestTable, num_slots: int, max_waiting: int, clock_ns: Callable[[], int]
    ) -> None:
        self.table = table
        self.num_slots = num_slots
        self.max_waiting = max_waiting
        self._clock_ns = clock_ns
        self._lock = threading.Lock()
        self._wakeup = threading.Condition(self._lock)
        self._arrivals: collections.deque[tuple[GenerationRequest, Sink]] = collections.deque()
        self._cancels: set[str] = set()
        self._arrival_ns: dict[str, int] = {}
        self._is_stopped = False

    def __bool__(self) -> bool:
        return bool(self._arrivals)

    def put(self, request: GenerationRequest, sink: Sink) -> None:
        """Queue an arrival; raises QueueFullError when the waiting queue is full."""
        with self._wakeup:
            if self._is_stopped:
                raise EngineStoppedError("the engine loop has stopped; see the server log")
            free = max(0, self.num_slots - self.table.num_held)
            if len(self._arrivals) + len(self.table.waiting) >= self.max_waiting + free:
                raise QueueFullError(
                    f"{self.max_waiting} requests are already waiting for a slot; retry later"
                )
            self._arrivals.append((request, sink))
            self._arrival_ns[request.request_id] = self._clock_ns()
            self._wakeup.notify()

    def cancel(self, request_id: str) -> None:
        with self._wakeup:
            self._cancels.add(request_id)
            self._wakeup.notify()

    def wait(self, timeout_s: float) -> None:
        """Block until something arrives, unless the table already holds work."""
        with self._wakeup:
            if not (self._arrivals or self._cancels or self.table.has_open):
                self._wakeup.wait(timeout_s)

    def wait_for_arrival(self, timeout_s: float) -> bool:
        """Block until an arrival or cancellation is queued or ``timeout_s`` passed; True
        if one is (the second slot's hold, loop/second_slot.py)."""
        with self._wakeup:
            if not (self._arrivals or self._cancels):
                self._wakeup.wait(timeout_s)
            return bool(self._arrivals or self._cancels)

    def drain(self) -> tuple[list[tuple[GenerationRequest, Sink]], set[str]]:
        with self._lock:
            arrivals = list(self._arrivals)
            self._arrivals.clear()
            cancels = set(self._cancels)
            self._cancels.clear()
        return arrivals, cancels

    def arrival_ns(self, request_id: str) -> int:
        """When ``request_id`` arrived (forgotten once read; now if never recorded)."""
        with self._lock:
            return self._arrival_ns.pop(request_id, self._clock_ns())

    def forget(self, request_id: str) -> None:
        with self._lock:
            self._arrival_ns.pop(request_id, None)

    def close(self) -> list[tuple[GenerationRequest, Sink]]:
        """Refuse further arrivals; returns the ones the loop never picked up."""
        with self._lock:
            self._is_stopped = True
            arrivals = list(self._arrivals)
            self._arrivals.clear()
            self._arrival_ns.clear()
        return arrivals
