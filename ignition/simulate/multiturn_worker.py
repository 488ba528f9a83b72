"""The engine's worker on a device model for the multi-turn runs: frames timed by the
device model, state copies timed as memory copies, planned replies emitted."""

from __future__ import annotations

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios import CompletionRecord, ExecutionTiming, LaneRole, RequestHandle
from ignition.runtime.executors.frames import FrameResult
from ignition.simulate.devices import DeviceError, DeviceModel, H200Roofline, execution_of
from ignition.simulate.multiturn_turns import NS_PER_MS

NOMINAL_CONTEXT_PER_ROW = 1024
STATE_COPY_LAUNCH_MS = 0.01


def state_copy_ms(device: DeviceModel, d: Descriptor, slot_capacity_tokens: int) -> float:
    """One snapshot-row copy: read and write the recurrent state and a slot's pages; an
    initialization writes zeros over the recurrent state only."""
    if isinstance(device, H200Roofline):
        if d.kind is GraphKind.INIT:
            moved = device.state_bytes_per_row
        else:
            moved = 2 * (
                device.state_bytes_per_row + slot_capacity_tokens * device.kv_bytes_per_token
            )
        return STATE_COPY_LAUNCH_MS + 1e3 * moved / (device.bandwidth_fraction * device.bandwidth)
    try:
        return device.duration_ms(execution_of(d, 0, 1, slot_capacity_tokens))
    except DeviceError as err:
        raise DeviceError(f"{device.name}: cannot time the {d.kind.value} copy ({err})") from None


class Clock:
    def __init__(self) -> None:
        self.now_ns = 0
        self.busy_until_ns = 0


class SimulatedWorker:
    """The engine's worker on a device model: frames run one after another on one queue
    and emit each request's planned reply."""

    def __init__(
        self,
        device: DeviceModel,
        clock: Clock,
        replies: dict[str, tuple[int, ...]],
        slot_capacity_tokens: int,
    ) -> None:
        self.device = device
        self.clock = clock
        self.replies = replies
        self.slot_capacity_tokens = slot_capacity_tokens
        self.prefill_tokens = 0
        self._emitted: dict[RequestHandle, int] = {}
        self._context: dict[RequestHandle, int] = {}

    def duration_ns(self, d: Descriptor, tokens: int, rows: int, context: int) -> int:
        if d.kind in (GraphKind.SNAPSHOT, GraphKind.RESTORE, GraphKind.INIT):
            ms = rows * state_copy_ms(self.device, d, self.slot_capacity_tokens)
        else:
            ms = self.device.duration_ms(execution_of(d, tokens, rows, context))
        return max(1, round(ms * NS_PER_MS))

    def nominal_ns(self, d: Descriptor) -> int:
        """A full graph at a nominal cached context: what a build's tuning measures."""
        rows = d.batch_capacity
        context = 0 if d.kind is GraphKind.PREFILL else rows * NOMINAL_CONTEXT_PER_ROW
        return self.duration_ns(d, d.packed_capacity + d.prefill_capacity, rows, context)

    def _token(self, handle: RequestHandle, live) -> tuple[int, ...]:
        reply = self.replies[live.request.request_id]
        i = self._emitted.get(handle, 0)
        self._emitted[handle] = i + 1
        return (reply[i],) if i < len(reply) else (reply[-1],)

    def launch(self, plan, fence, live):
        records, tokens, context = [], 0, 0
        for lane in plan.lanes:
            handle = lane.handle
            context += self._context.get(handle, 0)
            if lane.role is LaneRole.PROMPT:
                self.prefill_tokens += lane.num_prompt_tokens
                tokens += lane.num_prompt_tokens
                self._context[handle] = self._context.get(handle, 0) + lane.num_prompt_tokens
                ids = self._token(handle, live[handle]) if lane.max_advance_tokens else ()
                records.append(CompletionRecord(handle, lane.num_prompt_tokens, ids))
            elif lane.role is LaneRole.DECODE:
                tokens += lane.query_length
                self._context[handle] = self._context.get(handle, 0) + 1
                records.append(CompletionRecord(handle, 0, self._token(handle, live[handle])))
            else:
                if lane.role is LaneRole.RESTORE:
                    self._context[handle] = lane.checkpoint_tokens
                records.append(CompletionRecord(handle))
        device_ns = self.duration_ns(plan.descriptor, tokens, len(plan.lanes), context)
        start = max(self.clock.now_ns, self.clock.busy_until_ns)
        self.clock.busy_until_ns = start + device_ns
        timing = ExecutionTiming(device_ns, self.clock.busy_until_ns - self.clock.now_ns)
        return self.clock.busy_until_ns, FrameResult(tuple(records), timing)

    def wait(self, pending):
        end, result = pending
        self.clock.now_ns = max(self.clock.now_ns, end)
        return result

    def release(self, handle: RequestHandle) -> None:
        self._emitted.pop(handle, None)
        self._context.pop(handle, None)

    def carry_history(self, old: RequestHandle, new: RequestHandle) -> None:
        """The simulated device keeps no sampling history (and serves no images)."""


class Ids:
    """Placeholder detokenizer: the engine only needs some text per token."""

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return "".join(chr(0x4E00 + i % 2000) for i in ids)
