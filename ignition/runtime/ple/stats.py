"""The PLE table's delivery counters, torch-free so that ``/metrics`` reads them cheaply."""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class PleSnapshot:
    residency: str
    table_bytes: int
    rows_gathered: int = 0
    bytes_moved: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    exposed_ns: int = 0  # summed exposed delivery delay over frames
    frames: int = 0  # frames whose rows went through the mailbox


class PleStats:
    """Thread-safe counters: the mailbox thread adds, the metrics scrape reads."""

    def __init__(self, residency: str, table_bytes: int) -> None:
        self._lock = threading.Lock()
        self._s = PleSnapshot(residency, table_bytes)

    def add_gather(self, rows: int, nbytes: int, hits: int = 0, misses: int = 0) -> None:
        with self._lock:
            s = self._s
            self._s = PleSnapshot(
                s.residency, s.table_bytes, s.rows_gathered + rows, s.bytes_moved + nbytes,
                s.cache_hits + hits, s.cache_misses + misses, s.exposed_ns, s.frames,
            )  # fmt: skip

    def add_frame(self, exposed_ns: int) -> None:
        with self._lock:
            s = self._s
            self._s = PleSnapshot(
                s.residency, s.table_bytes, s.rows_gathered, s.bytes_moved, s.cache_hits,
                s.cache_misses, s.exposed_ns + exposed_ns, s.frames + 1,
            )  # fmt: skip

    def snapshot(self) -> PleSnapshot:
        with self._lock:
            return self._s
