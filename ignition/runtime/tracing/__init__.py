"""Trace export: Helios's frames, the requests' waits and deliveries and the loop's
counters as Chrome trace-event / Perfetto JSON (opened in ui.perfetto.dev), from a served
engine (hook.py) or the simulator, and the live summary /dashboard reads."""

from ignition.runtime.tracing.recorder import TraceRecorder
from ignition.runtime.tracing.records import FrameRecord, LaneRecord, frame_record
from ignition.runtime.tracing.writer import TraceFileWriter, check_trace_path, write_trace

__all__ = [
    "FrameRecord",
    "LaneRecord",
    "TraceFileWriter",
    "TraceRecorder",
    "check_trace_path",
    "frame_record",
    "write_trace",
]
