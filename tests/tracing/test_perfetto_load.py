"""The exported trace loads in Perfetto's own trace processor (pip ``perfetto``), with one
slice per complete event, a track per request and the counters. The processor is a
binary the package would download on first use; the suite never fetches it (CI reaches
package registries only): the test runs where ``PERFETTO_TRACE_PROCESSOR`` names an
installed ``trace_processor_shell`` or one is on PATH, and otherwise skips, leaving the
schema and structure tests (test_trace_export.py) to stand alone."""

from __future__ import annotations

import os
import shutil

import pytest

from ignition.runtime.tracing.recorder import TraceRecorder
from ignition.runtime.tracing.writer import write_trace
from tests.tracing.test_trace_export import scripted_run

trace_processor = pytest.importorskip("perfetto.trace_processor", reason="pip perfetto absent")


def open_processor(path):
    binary = os.environ.get("PERFETTO_TRACE_PROCESSOR") or shutil.which("trace_processor_shell")
    if not binary:
        pytest.skip("no trace_processor_shell installed (set PERFETTO_TRACE_PROCESSOR to one)")
    try:
        config = trace_processor.TraceProcessorConfig(bin_path=binary, load_timeout=30)
        return trace_processor.TraceProcessor(trace=str(path), config=config)
    except Exception as err:  # the shell binary could not be fetched or started
        pytest.skip(f"perfetto's trace_processor_shell is unavailable here: {err}")


def test_the_trace_loads_in_perfetto_with_the_expected_slices_and_tracks(tmp_path):
    recorder = TraceRecorder()
    scripted_run(recorder)
    path = tmp_path / "run.json"
    write_trace(recorder, path)
    expected_slices = sum(1 for e in recorder.events() if e["ph"] == "X")
    processor = open_processor(path)
    try:
        slices = next(iter(processor.query("select count(*) as n from slice"))).n
        named = processor.query("select name from thread where name is not null")
        threads = {r.name for r in named}
        counters = {r.name for r in processor.query("select distinct name from counter_track")}
    finally:
        processor.close()
    assert slices == expected_slices
    assert {"frames", "r0", "r1", "r2"} <= threads
    assert any(name.startswith("queue") for name in counters)
