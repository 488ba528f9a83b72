"""The just-in-time second frame slot (RuntimeOptions.queue_lead_ms, loop/second_slot.py):
"with one frame in flight, the engine plans the next only a lead before that frame is
expected to end, so a request that arrives meanwhile is planned ahead of a frame that
would otherwise already be queued"; a worker that cannot tell a frame's end holds
nothing."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from ignition.components.capacity import plan_catalog
from ignition.helios import CompletionRecord, ExecutionTiming, LaneRole, Resources, Scheduler
from ignition.recipes import LoadOptions, get_recipe
from ignition.runtime.executors.frames import FrameResult
from ignition.runtime.loop.engine import Engine
from ignition.runtime.loop.inbox import Inbox
from ignition.runtime.loop.second_slot import Release, SecondSlot, lead_ns_from_ms
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from ignition.runtime.requests.table import RequestTable

MS = 1_000_000
FRAME_NS = 10 * MS


class Clock:
    def __init__(self) -> None:
        self.ns = 0

    def __call__(self) -> int:
        return self.ns


def test_a_hold_ends_when_the_frame_ends():
    clock = Clock()
    slot = SecondSlot(2 * MS, clock)
    assert slot.hold(50 * MS, lambda: True, lambda s: pytest.fail("waited")) is Release.DONE


def _advancing_wait(clock: Clock, arrival_on_call: int = 0):
    """An inbox wait on the test's clock that records its timeouts; a request arrives
    on call ``arrival_on_call`` (0: never)."""
    waits: list[float] = []

    def wait(timeout_s: float) -> bool:
        waits.append(timeout_s)
        clock.ns += round(timeout_s * 1e9)
        return len(waits) == arrival_on_call

    return wait, waits


def test_a_hold_ends_a_lead_before_the_expected_end_waiting_at_most_a_poll():
    clock = Clock()
    wait, waits = _advancing_wait(clock)
    assert SecondSlot(2 * MS, clock).hold(10 * MS, lambda: False, wait) is Release.DUE
    assert clock.ns == 8 * MS
    assert max(waits) == pytest.approx(0.25e-3)


def test_a_hold_ends_when_a_request_arrives():
    clock = Clock()
    wait, waits = _advancing_wait(clock, arrival_on_call=3)
    assert SecondSlot(2 * MS, clock).hold(10 * MS, lambda: False, wait) is Release.ARRIVAL
    assert len(waits) == 3


def test_the_lead_option_is_milliseconds_and_refused_by_name():
    assert lead_ns_from_ms(None) is None
    assert lead_ns_from_ms(2.5) == 2_500_000
    for bad in (-1.0, math.nan, math.inf, "2", True):
        with pytest.raises(ValueError, match="RuntimeOptions.queue_lead_ms"):
            lead_ns_from_ms(bad)


def test_the_inbox_wakes_on_an_arrival_and_times_out_without_one():
    inbox = Inbox(RequestTable(), 4, 8, Clock())
    assert inbox.wait_for_arrival(0.001) is False
    inbox.put(GenerationRequest("a", (1, 2, 3)), lambda chunk: None)
    assert inbox.wait_for_arrival(10.0) is True


class Letters:
    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return "".join(chr(97 + i % 26) for i in ids)


@dataclass
class Pending:
    result: FrameResult
    end_ns: int


class AsyncWorker:
    """Frames run one after another for 10 ms each on the test's clock; ``is_done`` tells
    a frame's end without waiting, as a CUDA worker's event query does."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.free_ns = 0
        self.launches: list[tuple[int, bool]] = []  # (launch time, carries a prompt)

    def launch(self, plan, fence, live):
        records = []
        for lane in plan.lanes:
            if lane.role is LaneRole.PROMPT:
                ids = (30,) if lane.max_advance_tokens else ()
                records.append(CompletionRecord(lane.handle, lane.num_prompt_tokens, ids))
            else:
                records.append(CompletionRecord(lane.handle, 0, (31,)))
        self.free_ns = max(self.clock.ns, self.free_ns) + FRAME_NS
        prompt = any(lane.role is LaneRole.PROMPT for lane in plan.lanes)
        self.launches.append((self.clock.ns, prompt))
        timing = ExecutionTiming(device_ns=FRAME_NS, wall_ns=FRAME_NS)
        return Pending(FrameResult(tuple(records), timing), self.free_ns)

    def is_done(self, pending: Pending) -> bool:
        return self.clock.ns >= pending.end_ns

    def wait(self, pending: Pending) -> FrameResult:
        self.clock.ns = max(self.clock.ns, pending.end_ns)
        return pending.result

    def release(self, handle) -> None:
        pass

    def carry_history(self, old, new) -> None:
        pass


def _engine(lead_ns: int | None) -> tuple[Engine, AsyncWorker, Clock]:
    clock = Clock()
    catalog = plan_catalog(get_recipe("qwen38"), LoadOptions(mixed_prefill=True, speculation="off"))
    scheduler = Scheduler(catalog, resources=Resources(num_request_slots=4))
    for d in scheduler.programs().inference:
        scheduler.seed_cost(d, FRAME_NS)  # every estimate known: generation frames queue
    worker = AsyncWorker(clock)
    engine = Engine(
        scheduler, worker, Letters(), max_context_tokens=4096, clock_ns=clock, queue_lead_ns=lead_ns
    )
    _arrive_during_the_hold(engine, clock, at_ns=1 << 62)  # nobody arrives yet
    sampling = SamplingParams(max_tokens=64, temperature=0)
    engine.submit(GenerationRequest("a", tuple(range(1, 40)), sampling), lambda chunk: None)
    for _ in range(6):  # its prompt, then generation frames
        engine.step()
    return engine, worker, clock


def _arrive_during_the_hold(engine: Engine, clock: Clock, at_ns: int) -> None:
    """The inbox's wait, on the test's clock: request "b" arrives at ``at_ns``."""
    arrived: list[bool] = []

    def wait(timeout_s: float) -> bool:
        clock.ns = min(clock.ns + round(timeout_s * 1e9), max(clock.ns, at_ns))
        if clock.ns >= at_ns and not arrived:
            arrived.append(True)
            sampling = SamplingParams(max_tokens=4, temperature=0)
            engine.submit(GenerationRequest("b", tuple(range(1, 30)), sampling), lambda c: None)
        return bool(engine.inbox)

    engine.inbox.wait_for_arrival = wait


def _step_until_a_prompt_frame(engine: Engine, worker: AsyncWorker, since: int) -> None:
    for _ in range(20):
        if any(prompt for _, prompt in worker.launches[since:]):
            return
        engine.step()
    pytest.fail("no frame carried the arriving request's prompt")


def test_the_second_slot_is_filled_a_lead_before_the_frame_ahead_ends():
    engine, worker, clock = _engine(2 * MS)
    before = len(worker.launches)
    engine.step()
    (launched_ns, _), ahead_end = worker.launches[before], worker.free_ns - FRAME_NS
    assert launched_ns == ahead_end - 2 * MS


def test_a_request_arriving_while_the_slot_is_held_runs_before_another_generation_frame():
    engine, worker, clock = _engine(2 * MS)
    ahead_end = worker.free_ns
    _arrive_during_the_hold(engine, clock, at_ns=ahead_end - 6 * MS)
    before = len(worker.launches)
    _step_until_a_prompt_frame(engine, worker, before)
    assert [prompt for _, prompt in worker.launches[before:]] == [True]


def test_without_the_slot_rule_a_generation_frame_is_queued_first():
    engine, worker, clock = _engine(None)
    before = len(worker.launches)
    engine.step()  # fills the second slot at once
    _arrive_during_the_hold(engine, clock, at_ns=0)
    engine.inbox.wait_for_arrival(0.0)  # "b" arrives while that frame is queued
    _step_until_a_prompt_frame(engine, worker, before)
    assert [prompt for _, prompt in worker.launches[before:]][:2] == [False, True]
