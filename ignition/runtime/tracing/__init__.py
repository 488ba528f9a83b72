"""Trace export: frames, waits, deliveries and counters as Perfetto JSON, and /dashboard."""

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
