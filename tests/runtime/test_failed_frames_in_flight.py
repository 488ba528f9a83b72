"""Issue 38: a frame that fails while an older frame is still in flight fails only its own
requests; the older frame completes first, Helios retires the failed one in fence order,
and the loop goes on.

The fault plan of runtime/loop/faults.py marks a request by its first prompt token and, with
``@N``, fails it only once it has N output tokens: by then it decodes beside others and its
frames are queued behind theirs (the scripted worker keeps two frames in flight).
"""

from __future__ import annotations

import asyncio
import itertools
import logging

import pytest

from ignition.components.capacity import plan_catalog
from ignition.helios import Resources, Scheduler
from ignition.recipes import LoadOptions, get_recipe
from ignition.runtime.async_engine import AsyncEngine
from ignition.runtime.loop.engine import Engine
from ignition.runtime.loop.faults import FaultPlan, InjectedFault, install
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from tests.runtime.scripted import Letters, ScriptedWorker, expected_tokens

MARKER = 13
INNOCENTS = {"a": (1, 2, 3), "b": (4, 5), "c": (6, 7)}


def make_engine() -> Engine:
    """The scripted engine (tests/runtime/scripted.py) on a clock that advances 0.1 ms per
    reading, so that Helios queues the same frames on every run."""
    catalog = plan_catalog(get_recipe("qwen38"), LoadOptions(mixed_prefill=True, speculation="off"))
    scheduler = Scheduler(catalog, resources=Resources(num_request_slots=4))
    ticks = itertools.count(0, 100_000)
    return Engine(
        scheduler,
        ScriptedWorker(),
        Letters(),
        max_context_tokens=4096,
        clock_ns=lambda: next(ticks),
    )


def submit(engine, name, prompt, max_tokens):
    chunks = []
    sampling = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    engine.submit(GenerationRequest(name, tuple(prompt), sampling), chunks.append)
    return chunks


def count_outstanding(engine) -> dict:
    """Wrap the (fault-injecting) worker: frames launched and not yet waited for, as seen at
    each launch the fault plan refused."""
    seen = {"outstanding": 0, "at_fault": []}
    worker = engine.worker
    launch, wait = worker.launch, worker.wait

    def counted_launch(plan, fence, live):
        try:
            pending = launch(plan, fence, live)
        except InjectedFault:
            seen["at_fault"].append(seen["outstanding"])
            raise
        seen["outstanding"] += 1
        return pending

    def counted_wait(pending):
        seen["outstanding"] -= 1
        return wait(pending)

    worker.launch, worker.wait = counted_launch, counted_wait
    return seen


@pytest.mark.parametrize("stage", ["launch", "wait"])
def test_a_frame_failing_behind_a_frame_in_flight_fails_only_its_requests(stage):
    engine = make_engine()
    install(engine, FaultPlan.parse(f"{stage}={MARKER}@6"))
    seen = count_outstanding(engine)
    completed: list[int] = []
    complete = engine.scheduler.complete

    def record(fence, report):
        completed.append(fence.value)
        return complete(fence, report)

    engine.scheduler.complete = record
    innocents = {name: submit(engine, name, p, 24) for name, p in INNOCENTS.items()}
    bad = submit(engine, "bad", [MARKER, 2], 24)
    engine.run_until_idle(max_steps=2000)  # a stopped loop raises here
    if stage == "launch":  # the failing launch queued behind a frame still in flight
        assert seen["at_fault"] and max(seen["at_fault"]) >= 1
    assert bad[-1].finish_reason == "error"
    assert f"injected {stage} fault for bad" in bad[-1].error
    for name, chunks in innocents.items():
        assert chunks[-1].finish_reason == "length", (name, chunks[-1].error)
        want = expected_tokens(INNOCENTS[name], 24, stop_at_eos=False)
        assert "".join(c.text for c in chunks) == Letters().decode(want), name
    usage = engine.scheduler.usage()
    assert usage.num_free_slots == usage.num_request_slots
    assert usage.num_free_pages == usage.num_pages
    assert not engine.has_work and not engine.live
    # every committed fence was completed once, in commit order
    assert completed == list(range(engine._next_fence))
    # later requests are served by the same loop
    after = submit(engine, "after", [8, 9], 5)
    engine.run_until_idle()
    assert after[-1].finish_reason == "length"


def test_a_loop_that_cannot_continue_says_so_in_one_log_line(caplog):
    """An error outside any frame or request (the ``step`` fault) stops the loop with one
    log line naming it; the traceback is logged only at debug level."""
    engine = make_engine()
    install(engine, FaultPlan.parse(f"step={MARKER}"))
    bridge = AsyncEngine(engine, model_name="m", encode=lambda t: [1])

    async def go():
        bridge.start()
        try:
            stream = bridge.generate(GenerationRequest("s", (MARKER, 1), SamplingParams()))
            return [c async for c in stream][-1]
        finally:
            bridge.stop()

    with caplog.at_level(logging.INFO, logger="ignition"):
        end = asyncio.run(go())
    assert end.finish_reason == "error"
    stopped = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in stopped] == [
        "the engine loop stopped: InjectedFault: injected step fault for s"
    ]
    assert stopped[0].exc_info is None and "\n" not in stopped[0].getMessage()
