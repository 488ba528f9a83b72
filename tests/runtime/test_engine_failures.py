"""Issue 15: a failure costs only the request that caused it; the loop goes on.

The scripted worker (tests/runtime/scripted.py) stands in for the model; a
"poisoned" request (its prompt starts with POISON) makes every frame holding it
raise, as an input the model cannot take would.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import replace

import pytest

from ignition.helios import CompletionRecord
from ignition.runtime.async_engine import AsyncEngine
from ignition.runtime.requests.errors import EngineStoppedError, QueueFullError, RequestError
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from tests.runtime.scripted import Letters, expected_tokens, make_engine

POISON = 13


def submit(engine, request_id, prompt, **sampling):
    chunks = []
    engine.submit(
        GenerationRequest(request_id, tuple(prompt), SamplingParams(**sampling)), chunks.append
    )
    return chunks


def text_of(chunks):
    return "".join(c.text for c in chunks)


def poison_frames(worker, stage: str = "launch"):
    """Frames holding a poisoned request raise at launch (or at wait)."""
    real_launch, real_wait = worker.launch, worker.wait

    def launch(plan, fence, live):
        poisoned = any(live[lane.handle].request.prompt_ids[0] == POISON for lane in plan.lanes)
        if poisoned and stage == "launch":
            raise RuntimeError("device fault")
        return real_launch(plan, fence, live), poisoned

    def wait(pending):
        result, poisoned = pending
        if poisoned:
            raise RuntimeError("device fault at wait")
        return real_wait(result)

    worker.launch, worker.wait = launch, wait


@pytest.mark.parametrize("stage", ["launch", "wait"])
def test_a_frame_failing_for_one_request_never_takes_down_the_others(stage, caplog):
    engine, worker = make_engine()
    poison_frames(worker, stage)
    a = submit(engine, "a", [1, 2, 3], max_tokens=12, ignore_eos=True)
    b = submit(engine, "b", [4, 5], max_tokens=12, ignore_eos=True)
    for _ in range(3):  # a and b are decoding together when the poisoned prompt arrives
        engine.step()
    bad = submit(engine, "bad", [POISON, 2, 3], max_tokens=12, ignore_eos=True)
    engine.run_until_idle()
    assert bad[-1].finish_reason == "error"
    assert "device fault" in bad[-1].error
    for chunks, prompt in ((a, [1, 2, 3]), (b, [4, 5])):
        assert chunks[-1].finish_reason == "length"
        assert text_of(chunks) == Letters().decode(expected_tokens(prompt, 12, stop_at_eos=False))
        assert chunks[-1].num_output_tokens == 12
        assert chunks[-1].num_prompt_tokens == len(prompt)
    assert engine.stats.snapshot().finished_by_reason == {"error": 1, "length": 2}
    assert not engine.live and not engine.has_work
    restarted = {r.getMessage().split(":")[0] for r in caplog.records if "restarting" in r.message}
    assert {"a", "b"} <= restarted  # they shared the failed frame and were replayed


def test_restarted_requests_run_on_probation_one_at_a_time_so_the_faulty_one_is_found():
    engine, worker = make_engine()
    calls = {"n": 0}
    real_launch = worker.launch

    def always_failing_with_company(plan, fence, live):
        calls["n"] += 1
        if len(plan.lanes) > 1 or live[plan.lanes[0].handle].request.request_id == "x":
            raise RuntimeError("shared fault")
        return real_launch(plan, fence, live)

    worker.launch = always_failing_with_company
    x = submit(engine, "x", [1, 2], max_tokens=4, ignore_eos=True)
    y = submit(engine, "y", [3, 4], max_tokens=4, ignore_eos=True)
    engine.run_until_idle()
    assert x[-1].finish_reason == "error"
    assert y[-1].finish_reason == "length"


def test_several_faulty_requests_never_use_up_an_innocent_requests_restarts():
    engine, worker = make_engine()
    poison_frames(worker)
    innocents = {
        name: submit(engine, name, prompt, max_tokens=16, ignore_eos=True)
        for name, prompt in (("a", [1, 2, 3]), ("b", [4, 5]), ("c", [6]))
    }
    bad = []
    for i in range(4):  # each arrives while the innocents decode (or wait to restart)
        engine.step()
        bad.append(submit(engine, f"bad{i}", [POISON, i + 1], max_tokens=16, ignore_eos=True))
    engine.run_until_idle()
    assert [chunks[-1].finish_reason for chunks in bad] == ["error"] * 4
    for name, chunks in innocents.items():
        assert chunks[-1].finish_reason == "length", name
        assert chunks[-1].num_output_tokens == 16


def test_cancelling_a_request_waiting_to_restart_ends_it_with_abort():
    engine, worker = make_engine()
    poison_frames(worker)
    a = submit(engine, "a", [1, 2, 3], max_tokens=30, ignore_eos=True)
    submit(engine, "bad", [POISON], max_tokens=30, ignore_eos=True)
    engine.step()  # one prefill frame holds both and fails
    engine.cancel("a")
    engine.run_until_idle()
    assert a[-1].finish_reason == "abort"


def test_a_request_whose_publication_raises_ends_alone():
    engine, _ = make_engine()

    def hook(stage, live):
        if stage == "publish" and live.request.request_id == "bad":
            raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")

    engine.fault_hook = hook
    good = submit(engine, "good", [1, 2, 3], max_tokens=6, ignore_eos=True)
    bad = submit(engine, "bad", [1, 2, 3], max_tokens=6, ignore_eos=True)
    engine.run_until_idle()
    assert bad[-1].finish_reason == "error" and "publication failed" in bad[-1].error
    assert good[-1].finish_reason == "length"
    assert text_of(good) == Letters().decode(expected_tokens([1, 2, 3], 6, stop_at_eos=False))


def test_records_helios_rejects_fail_the_frame_not_the_loop():
    engine, worker = make_engine()
    real_launch = worker.launch
    calls = {"n": 0}

    def malformed_once(plan, fence, live):
        result = real_launch(plan, fence, live)
        calls["n"] += 1
        if calls["n"] == 2:  # a decode record claiming more tokens than the lane allows
            record = result.records[0]
            bad = CompletionRecord(record.handle, 0, (1,) * 50)
            return type(result)((bad,), result.timing)
        return result

    worker.launch = malformed_once
    first = submit(engine, "a", [1, 2, 3], max_tokens=6, ignore_eos=True)
    engine.run_until_idle()
    later = submit(engine, "b", [1, 2, 3], max_tokens=6, ignore_eos=True)
    engine.run_until_idle()
    assert first[-1].finish_reason == "error"
    assert later[-1].finish_reason == "length"


def test_arrivals_not_yet_picked_up_do_not_count_as_waiting():
    engine, _ = make_engine(num_slots=4, max_waiting=4)
    for i in range(8):  # four take the free slots, four wait; no step has run yet
        submit(engine, f"r{i}", [1, 2], max_tokens=2)
    with pytest.raises(QueueFullError):
        submit(engine, "r8", [1, 2], max_tokens=2)


def test_the_engine_checks_prompt_ids_against_the_vocabulary():
    engine, _ = make_engine()
    engine.vocab_size = 26
    with pytest.raises(RequestError, match=r"prompt\[1\] = 26 .* 26 ids"):
        submit(engine, "a", [1, 26])


def test_when_the_loop_cannot_continue_every_request_ends_with_an_error_and_on_fatal_runs():
    engine, _ = make_engine(num_slots=1)
    fatal: list[str] = []

    def hook(stage, live):
        if stage == "step" and live.output_ids:
            raise AssertionError("scheduler invariant broken")

    engine.fault_hook = hook
    bridge = AsyncEngine(engine, model_name="m", encode=lambda t: [1], on_fatal=fatal.append)

    async def go():
        bridge.start()
        try:
            running = bridge.generate(
                GenerationRequest("a", (1, 2), SamplingParams(max_tokens=50, ignore_eos=True))
            )
            waiting = bridge.generate(GenerationRequest("b", (3,), SamplingParams(max_tokens=5)))
            ends = []
            for stream in (running, waiting):
                chunks = [c async for c in stream]
                ends.append(chunks[-1])
            return ends
        finally:
            bridge.stop()

    ends = asyncio.run(go())
    assert [c.finish_reason for c in ends] == ["error", "error"]
    assert all("scheduler invariant broken" in c.error for c in ends)
    assert len(fatal) == 1 and "AssertionError" in fatal[0]
    assert not bridge.is_healthy()

    async def after():
        return bridge.generate(GenerationRequest("c", (1,), SamplingParams()))

    with pytest.raises(EngineStoppedError):
        asyncio.run(after())


def test_a_restart_takes_its_output_limit_from_the_scheduler_view_not_its_own_count():
    """Helios's view answers SHIFT tokens fewer than it holds: a restarted request that reads
    the view ends SHIFT tokens short per restart; one that counted max_tokens less its own
    output would run to max_tokens."""
    shift = 2
    engine, worker = make_engine()
    poison_frames(worker)
    request, restart = engine.scheduler.request, engine.table.restart
    restarts: Counter[str] = Counter()

    def shifted(handle):
        view = request(handle)
        return view and replace(view, remaining_output=view.remaining_output - shift)

    def counting(live, remaining_output):
        restarts[live.request.request_id] += 1
        restart(live, remaining_output)

    engine.scheduler.request, engine.table.restart = shifted, counting
    a = submit(engine, "a", [1, 2, 3], max_tokens=12, ignore_eos=True)
    for _ in range(3):  # a is decoding when the poisoned prompt joins its frame
        engine.step()
    submit(engine, "bad", [POISON, 2, 3], max_tokens=12, ignore_eos=True)
    engine.run_until_idle()
    assert restarts["a"] >= 1 and a[-1].finish_reason == "length"
    n = 12 - shift * restarts["a"]
    assert a[-1].num_output_tokens == n
    assert text_of(a) == Letters().decode(expected_tokens([1, 2, 3], n, stop_at_eos=False))
