"""Writes a recorder's trace to a file off the engine thread."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from ignition.runtime.tracing.recorder import TraceRecorder


def write_trace(recorder: TraceRecorder, path: str | Path) -> None:
    """The recorder's trace as one JSON document at ``path`` (atomically replaced)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(recorder.document(), f, separators=(",", ":"))
    os.replace(tmp, path)


def check_trace_path(path: str) -> Path:
    """The trace file's path; its folder must exist (an error at startup, not a lost trace)."""
    target = Path(path)
    if target.is_dir():
        raise ValueError(f"--trace-file {path}: is a folder; name a file")
    if not target.parent.is_dir():
        raise ValueError(f"--trace-file {path}: folder {target.parent} does not exist")
    return target


class TraceFileWriter:
    """Keeps ``path`` up to date with ``recorder`` from its own thread."""

    def __init__(self, recorder: TraceRecorder, path: str | Path, interval_s: float = 2.0):
        self.recorder = recorder
        self.path = Path(path)
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._written = -1
        self._thread = threading.Thread(target=self._run, name="trace-writer", daemon=True)

    def start(self) -> TraceFileWriter:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.flush()

    def flush(self) -> None:
        version = self.recorder.version
        if version != self._written:
            write_trace(self.recorder, self.path)
            self._written = version

    def close(self) -> None:
        """Stop the thread and write what the ring holds now."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.flush()
