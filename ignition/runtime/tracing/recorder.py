"""A bounded ring of Perfetto trace events, and the live summary the dashboard reads."""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from typing import Any

from ignition.runtime.tracing.records import FrameRecord

DEVICE_PID, REQUESTS_PID = 1, 2
DEVICE_TID = 1
DEFAULT_CAPACITY = 200_000  # events; about 80 MB of JSON at most
DEFAULT_RECENT_FRAMES = 240  # frames the dashboard can show
LATENCY_SAMPLES = 2048  # TTFT and TBT samples kept for the percentiles
ACCEPTANCE_WEIGHT = 0.1  # the acceptance estimate's exponential weight per round


def _us(ns: int) -> float:
    return round(ns / 1000, 3)


class TraceRecorder:
    """Collects frames, waits, deliveries and counters from one engine or simulation."""

    def __init__(
        self, capacity: int = DEFAULT_CAPACITY, recent_frames: int = DEFAULT_RECENT_FRAMES
    ) -> None:
        if capacity < 1:
            raise ValueError(f"trace capacity {capacity}: must be >= 1")
        self.capacity = capacity
        self._lock = threading.Lock()
        self._events: deque[dict[str, Any]] = deque(maxlen=capacity)
        self._tids: OrderedDict[str, int] = OrderedDict()  # request id -> thread, LRU
        self._next_tid = 1
        self._recent: deque[dict[str, Any]] = deque(maxlen=recent_frames)
        self._ttft_ms: deque[float] = deque(maxlen=LATENCY_SAMPLES)
        self._tbt_ms: deque[float] = deque(maxlen=LATENCY_SAMPLES)
        self._last_delivery: dict[str, int] = {}
        self._counters: dict[str, dict[str, float]] = {}
        self._acceptance: float | None = None
        self.version = 0  # bumped on every append: a writer skips unchanged rings
        self.num_frames = 0

    def _tid(self, request: str) -> int:
        tid = self._tids.get(request)
        if tid is None:
            tid = self._tids[request] = self._next_tid
            self._next_tid += 1
            if len(self._tids) > self.capacity:
                self._tids.popitem(last=False)
        else:
            self._tids.move_to_end(request)
        return tid

    def frame(self, frame: FrameRecord) -> None:
        """A completed frame: one device event, one event per lane on its request's track."""
        ts, dur = _us(frame.start_ns), _us(max(frame.duration_ns, 0))
        lanes = [
            {"request": lane.request, "role": lane.role, "width": lane.query_length}
            for lane in frame.lanes
        ]
        args = {
            "fence": frame.fence,
            "program": frame.program,
            "B": frame.batch,
            "D": frame.depth,
            "W": frame.tokens,
            "P": frame.prefill,
            "lanes": lanes,
            "measured_us": dur,
            "predicted_us": _us(frame.predicted_ns),
            "reason": frame.reason,
            "execution_class": frame.execution_class,
            "value_rate": frame.value_rate,
            "log_scale": frame.log_scale,
        }
        device = {"ph": "X", "name": frame.kind, "cat": "frame", "ts": ts, "dur": dur}
        device.update(pid=DEVICE_PID, tid=DEVICE_TID, args=args)
        with self._lock:
            self._events.append(device)
            for lane in frame.lanes:
                self._events.append(self._lane_event(frame, lane, ts, dur))
                self._acceptance_round(lane.num_offered, lane.num_accepted)
            self._recent.append(self._recent_frame(frame))
            self.version += 1
            self.num_frames += 1

    def _lane_event(self, frame: FrameRecord, lane, ts: float, dur: float) -> dict[str, Any]:
        if lane.role == "prompt":
            name, args = "prefill chunk", {"prompt_tokens": lane.num_prompt_tokens}
        elif lane.num_offered:
            name = "speculative round"
            args = {"offered": lane.num_offered, "accepted": lane.num_accepted}
        elif lane.role == "decode":
            name, args = "delivery", {}
        else:
            name, args = lane.role, {}
        args.update(fence=frame.fence, tokens=lane.num_tokens, width=lane.query_length)
        tid = self._tid(lane.request)
        return {"ph": "X", "name": name, "cat": "request", "ts": ts, "dur": dur,
                "pid": REQUESTS_PID, "tid": tid, "args": args}  # fmt: skip

    def _acceptance_round(self, offered: int, accepted: int) -> None:
        if offered > 0:
            rate = accepted / offered
            old = self._acceptance
            self._acceptance = rate if old is None else old + ACCEPTANCE_WEIGHT * (rate - old)

    @staticmethod
    def _recent_frame(frame: FrameRecord) -> dict[str, Any]:
        return {
            "fence": frame.fence,
            "start_ms": frame.start_ns / 1e6,
            "duration_ms": frame.duration_ns / 1e6,
            "predicted_ms": frame.predicted_ns / 1e6,
            "kind": frame.kind,
            "program": frame.program,
            "B": frame.batch,
            "D": frame.depth,
            "W": frame.tokens,
            "P": frame.prefill,
            "reason": frame.reason,
            "execution_class": frame.execution_class,
            # a prefill lane's width is its chunk of prompt tokens, a decoder's its rows
            "lanes": [
                [lane.width_class, lane.num_prompt_tokens if lane.role == "prompt" else lane.query_length]
                for lane in frame.lanes
            ],
        }

    def has_track(self, request: str) -> bool:
        """Whether ``request`` has a track (its first frame or wait was recorded)."""
        with self._lock:
            return request in self._tids

    def wait(self, request: str, start_ns: int, end_ns: int) -> None:
        """``request`` waited for a slot from ``start_ns`` (arrival) to ``end_ns``."""
        event = {"ph": "X", "name": "wait for slot", "cat": "request", "ts": _us(start_ns),
                 "dur": _us(max(0, end_ns - start_ns)), "pid": REQUESTS_PID, "args": {}}  # fmt: skip
        with self._lock:
            event["tid"] = self._tid(request)
            self._events.append(event)
            self.version += 1

    def deliver(self, now_ns: int, deliveries: list[tuple[str, int, int]]) -> None:
        """Tokens that reached each request's client at ``now_ns``: TTFT and TBT samples."""
        with self._lock:
            for request, num_tokens, arrival_ns in deliveries:
                if num_tokens <= 0:
                    continue
                last = self._last_delivery.get(request)
                if last is None:
                    self._ttft_ms.append((now_ns - arrival_ns) / 1e6)
                else:
                    self._tbt_ms.append((now_ns - last) / 1e6 / num_tokens)
                self._last_delivery[request] = now_ns

    def forget(self, request: str) -> None:
        """``request`` is done: drop its delivery clock (its track stays)."""
        with self._lock:
            self._last_delivery.pop(request, None)

    def counters(self, now_ns: int, values: dict[str, dict[str, float]]) -> None:
        """Counter tracks at ``now_ns``: ``{"queue": {"waiting": 3, ...}, "pages": {...}}``."""
        ts = _us(now_ns)
        if self._acceptance is not None:
            values = {**values, "acceptance": {"estimate": round(self._acceptance, 4)}}
        with self._lock:
            for name, args in values.items():
                self._events.append(
                    {"ph": "C", "name": name, "ts": ts, "pid": DEVICE_PID, "args": dict(args)}
                )
            self._counters.update(values)
            self.version += 1

    def events(self) -> list[dict[str, Any]]:
        """The trace's events: track names (metadata) first, then the ring, oldest first."""
        with self._lock:
            ring = list(self._events)
            names = list(self._tids.items())
        meta = [
            _meta("process_name", DEVICE_PID, 0, "device"),
            _meta("thread_name", DEVICE_PID, DEVICE_TID, "frames"),
            _meta("process_name", REQUESTS_PID, 0, "requests"),
        ]
        meta += [_meta("thread_name", REQUESTS_PID, tid, name) for name, tid in names]
        return meta + ring

    def document(self) -> dict[str, Any]:
        """The JSON object a trace file holds (chrome://tracing's object form)."""
        return {"traceEvents": self.events(), "displayTimeUnit": "ms"}

    def summary(self, num_frames: int = 120) -> dict[str, Any]:
        """The dashboard's state: recent frames, widths, TTFT/TBT percentiles, counters."""
        with self._lock:
            frames = list(self._recent)[-num_frames:] if num_frames > 0 else []
            ttft, tbt = sorted(self._ttft_ms), sorted(self._tbt_ms)
            counters = {k: dict(v) for k, v in self._counters.items()}
            total = self.num_frames
        widths: dict[str, dict[str, int]] = {}
        for frame in frames:
            for klass, width in frame["lanes"]:
                row = widths.setdefault(klass, {})
                row[str(width)] = row.get(str(width), 0) + 1
        return {
            "frames": frames,
            "num_frames": total,
            "widths": widths,
            "ttft_ms": _percentiles(ttft),
            "tbt_ms": _percentiles(tbt),
            "counters": counters,
            "reason": frames[-1]["reason"] if frames else None,
            "decision": frames[-1] if frames else None,
        }


def _meta(name: str, pid: int, tid: int, value: str) -> dict[str, Any]:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "ts": 0, "args": {"name": value}}


def _percentiles(values: list[float]) -> dict[str, float | int | None]:
    """p50/p90/p99 of sorted ``values`` (nearest rank) and their count."""
    if not values:
        return {"count": 0, "p50": None, "p90": None, "p99": None}
    pick = lambda q: round(values[min(len(values) - 1, int(q * len(values)))], 3)  # noqa: E731
    return {"count": len(values), "p50": pick(0.5), "p90": pick(0.9), "p99": pick(0.99)}
