"""The trace file is written off the engine thread: the writer's thread rewrites it while
the ring changes, through a temporary file, and ``close`` writes what the ring holds."""

from __future__ import annotations

import json
import time

from ignition.runtime.tracing.recorder import TraceRecorder
from ignition.runtime.tracing.writer import TraceFileWriter


def test_the_writer_thread_rewrites_the_file_while_the_ring_grows(tmp_path):
    recorder = TraceRecorder()
    path = tmp_path / "t.json"
    writer = TraceFileWriter(recorder, path, interval_s=0.01).start()
    try:
        recorder.wait("r0", 0, 1000)
        deadline = time.monotonic() + 10
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        first = json.loads(path.read_text())
        recorder.wait("r1", 0, 2000)
        while len(json.loads(path.read_text())["traceEvents"]) == len(first["traceEvents"]):
            assert time.monotonic() < deadline, "the writer did not rewrite the file"
            time.sleep(0.01)
    finally:
        writer.close()
    assert not (tmp_path / "t.json.tmp").exists()


def test_close_writes_the_last_events_without_waiting_for_the_interval(tmp_path):
    recorder = TraceRecorder()
    path = tmp_path / "t.json"
    writer = TraceFileWriter(recorder, path, interval_s=3600).start()
    recorder.wait("r0", 0, 1000)
    writer.close()
    names = [e["name"] for e in json.loads(path.read_text())["traceEvents"]]
    assert "wait for slot" in names
