"""The trace export: a scripted engine run with a trace hook writes a document in the
Chrome trace-event format with the expected tracks and counts."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from ignition.runtime.tracing.hook import install_trace_hook
from ignition.runtime.tracing.recorder import TraceRecorder
from ignition.runtime.tracing.writer import TraceFileWriter, check_trace_path
from tests.runtime.scripted import make_engine
from tests.tracing.trace_schema import schema_errors


class Sink:
    def put(self, chunk) -> None:
        pass


def scripted_run(recorder: TraceRecorder, num_requests: int = 3, max_tokens: int = 5) -> None:
    """``num_requests`` requests of ``max_tokens`` tokens each on two slots: one waits."""
    engine, _worker = make_engine(num_slots=2)
    install_trace_hook(engine, recorder)
    for i in range(num_requests):
        sampling = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
        engine.submit(GenerationRequest(f"r{i}", (1, 2, 3), sampling), Sink())
    engine.run_until_idle()


def test_the_scripted_run_validates_against_the_trace_event_format(tmp_path):
    recorder = TraceRecorder()
    scripted_run(recorder)
    writer = TraceFileWriter(recorder, tmp_path / "run.json")
    writer.close()
    document = json.loads((tmp_path / "run.json").read_text())
    assert schema_errors(document) == []


def test_the_schema_check_refuses_what_the_format_forbids():
    bad = {"traceEvents": [{"ph": "X", "name": "f", "pid": 1, "tid": 1, "ts": 0}]}
    assert schema_errors(bad) == ["event 0: a complete event needs a nonnegative dur"]
    counter = {"ph": "C", "name": "q", "pid": 1, "ts": 1, "args": {"n": "3"}}
    assert schema_errors({"traceEvents": [counter]}) != []


def test_the_trace_has_a_device_track_a_track_per_request_and_counters():
    recorder = TraceRecorder()
    scripted_run(recorder, num_requests=3, max_tokens=5)
    events = recorder.events()
    threads = {(e["pid"], e["args"]["name"]) for e in events if e["name"] == "thread_name"}
    assert threads == {(1, "frames"), (2, "r0"), (2, "r1"), (2, "r2")}
    frames = [e for e in events if e["ph"] == "X" and e["pid"] == 1]
    assert len(frames) == recorder.num_frames > 0
    for frame in frames:
        assert {"B", "D", "W", "P", "lanes", "measured_us", "predicted_us", "reason"} <= set(
            frame["args"]
        )
    by_name = Counter(e["name"] for e in events if e["pid"] == 2 and e["ph"] == "X")
    assert by_name["wait for slot"] == 3  # one per request, whether it waited long or not
    assert by_name["prefill chunk"] == 3  # three-token prompts: one chunk each
    # each request's five tokens: one from its prefill, four delivered by decode frames
    tokens = Counter()
    for e in events:
        if e["pid"] == 2 and e["ph"] == "X" and e["name"] != "wait for slot":
            tokens[e["tid"]] += e["args"]["tokens"]
    assert sorted(tokens.values()) == [5, 5, 5]
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert counters == {"queue", "pages", "prices"}


def test_the_device_track_never_overlaps_itself():
    recorder = TraceRecorder()
    scripted_run(recorder)
    frames = [e for e in recorder.events() if e["ph"] == "X" and e["pid"] == 1]
    ends = [f["ts"] + f["dur"] for f in frames]
    assert all(f["ts"] >= end - 1e-3 for f, end in zip(frames[1:], ends, strict=False))


def test_the_ring_keeps_only_the_newest_events():
    recorder = TraceRecorder(capacity=10)
    scripted_run(recorder, num_requests=3, max_tokens=20)
    events = recorder.events()
    assert len([e for e in events if e["ph"] != "M"]) == 10
    assert recorder.num_frames > 10


def test_the_summary_has_percentiles_widths_and_the_current_reason():
    recorder = TraceRecorder()
    scripted_run(recorder)
    summary = recorder.summary(5)
    assert len(summary["frames"]) == 5
    assert summary["ttft_ms"]["count"] == 3 and summary["tbt_ms"]["count"] > 0
    assert summary["reason"] == summary["frames"][-1]["reason"]
    assert set(summary["widths"]) <= {"prefill", "decode", "speculative"}
    assert all(int(width) > 0 for row in summary["widths"].values() for width in row)
    assert summary["counters"]["queue"]["waiting"] == 0


def test_a_trace_file_in_a_missing_folder_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="missing: does not exist|folder .* does not exist"):
        check_trace_path(str(tmp_path / "missing" / "t.json"))


def test_a_state_operation_lane_is_its_own_class_not_a_decode():
    from ignition.runtime.tracing.records import LaneRecord

    terminal = LaneRecord("r0", "terminal", 0, 0, 0)
    assert terminal.width_class == "terminal"
    assert LaneRecord("r0", "decode", 0, 3, 2, num_offered=2).width_class == "speculative"
