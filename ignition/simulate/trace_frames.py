"""The simulator's side of the trace export (runtime/tracing/): each simulated frame and
wait becomes the same records a served engine writes, so ``ignition simulate
--trace-file`` and ``ignition serve --trace-file`` are read the same way (ui.perfetto.dev).
Times are simulated nanoseconds from the run's start."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ignition.helios import CompletionRecord, LaneRole, RequestHandle, ScheduledPlan
from ignition.runtime.tracing.recorder import TraceRecorder
from ignition.runtime.tracing.records import frame_record

NS_PER_MS = 1_000_000


def record_frame(
    recorder: TraceRecorder,
    run: Any,
    records: Sequence[CompletionRecord],
    rows: Sequence[int],
    streams: Mapping[RequestHandle, Any],
    now_ns: int,
    scheduler: Any,
) -> None:
    """One completed simulated frame (``run``: sim_state.Running; ``rows``: each lane's verified
    rows), its lanes' first waits, deliveries and the counters after it (the simulator's
    arrival queue is its loop's own: the queue counter has the running requests only)."""
    plan: ScheduledPlan = run.plan
    names, tokens, offered = [], [], []
    for lane, record, q in zip(plan.lanes, records, rows, strict=True):
        stream = streams[lane.handle]
        name = f"request {stream.index}"
        names.append(name)
        tokens.append(len(record.token_ids))
        offered.append(q - 1 if lane.role is not LaneRole.PROMPT and q > 1 else 0)
        if not recorder.has_track(name):  # its first frame: the wait before it
            admitted = round((stream.record.admitted_ms or 0.0) * NS_PER_MS)
            recorder.wait(name, stream.arrival_ns, max(admitted, stream.arrival_ns))
    frame = frame_record(plan, run.fence, run.start_ns, run.device_ns, names, tokens, offered)
    recorder.frame(frame)
    arrivals = [streams[lane.handle].arrival_ns for lane in plan.lanes]
    recorder.deliver(now_ns, list(zip(names, tokens, arrivals, strict=True)))
    usage = scheduler.usage()
    recorder.counters(
        now_ns,
        {
            "queue": {"running": usage.num_request_slots - usage.num_free_slots},
            "pages": {"used": usage.num_pages - usage.num_free_pages,
                      "free": usage.num_free_pages},  # fmt: skip
            "prices": {"value_rate": plan.value_rate, "log_scale": plan.log_scale},
        },
    )
