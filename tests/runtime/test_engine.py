"""The engine loop with the real Helios scheduler and a scripted worker.

The worker stands in for the model: token t+1 = (t * 7 + 3) % 26 over a
letters-only "vocabulary", so outputs are deterministic and checkable, and the
tests exercise admission, publication, stop buffering, EOS, output limits,
cancellation and slot reuse without torch.
"""

from __future__ import annotations

import pytest

from ignition.components.capacity import plan_catalog
from ignition.helios import Resources, Scheduler
from ignition.recipes import LoadOptions, get_recipe
from ignition.runtime.loop.engine import Engine
from ignition.runtime.requests.errors import QueueFullError
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from tests.runtime.scripted import EOS, Letters, ScriptedWorker, expected_tokens, make_engine


def submit(engine, request_id, prompt, **sampling):
    chunks = []
    engine.submit(
        GenerationRequest(request_id, tuple(prompt), SamplingParams(**sampling)), chunks.append
    )
    return chunks


def text_of(chunks):
    return "".join(c.text for c in chunks)


def test_a_request_streams_its_tokens_and_ends_with_length():
    engine, _ = make_engine()
    prompt = [1, 2, 3]  # successors of 3: 24, 15, 4, 5, 12, ... (no EOS in the first 6)
    chunks = submit(engine, "a", prompt, max_tokens=6)
    engine.run_until_idle()
    expected = expected_tokens(prompt, 6)
    assert EOS not in expected
    assert text_of(chunks) == Letters().decode(expected)
    assert chunks[-1].finish_reason == "length"
    assert chunks[-1].num_output_tokens == 6
    assert chunks[-1].num_prompt_tokens == 3


def test_eos_ends_the_request_with_stop_and_is_not_shown():
    engine, _ = make_engine()
    prompt = [4, 11]  # 11 -> 2 -> 17 -> 18 -> 25 (EOS)
    chunks = submit(engine, "a", prompt, max_tokens=50)
    engine.run_until_idle()
    assert expected_tokens(prompt, 50)[-1] == EOS
    assert chunks[-1].finish_reason == "stop"
    assert text_of(chunks) == Letters().decode(expected_tokens(prompt, 50))
    assert "z" not in text_of(chunks)


def test_stop_string_ends_output_before_the_stop():
    engine, worker = make_engine()
    prompt = [1, 2, 3]
    full = Letters().decode(expected_tokens(prompt, 8))
    stop = full[3:5]
    chunks = submit(engine, "a", prompt, max_tokens=8, stop=(stop,))
    engine.run_until_idle()
    assert text_of(chunks) == full[: full.index(stop)]
    assert chunks[-1].finish_reason == "stop"
    assert engine.live == {}
    assert worker.released


def test_concurrent_requests_all_complete_independently():
    engine, _ = make_engine()
    prompts = {f"r{i}": [i + 1] * (5 + 30 * i) for i in range(4)}
    chunks = {
        rid: submit(engine, rid, p, max_tokens=5, ignore_eos=True) for rid, p in prompts.items()
    }
    engine.run_until_idle()
    for rid, prompt in prompts.items():
        expected = expected_tokens(prompt, 5, stop_at_eos=False)
        assert text_of(chunks[rid]) == Letters().decode(expected)
        assert chunks[rid][-1].finish_reason == "length"


def test_more_requests_than_slots_wait_and_reuse_freed_slots():
    engine, worker = make_engine(num_slots=2)
    all_chunks = [
        submit(engine, f"r{i}", [i + 1, 3], max_tokens=3, ignore_eos=True) for i in range(5)
    ]
    engine.run_until_idle()
    assert all(c[-1].finish_reason == "length" for c in all_chunks)
    assert len({h.slot for h in worker.released}) <= 2
    assert len(worker.released) == 5


def test_waiting_queue_full_is_refused():
    engine, _ = make_engine(num_slots=1, max_waiting=2)
    submit(engine, "a", [1])  # takes the free slot
    submit(engine, "b", [1])
    submit(engine, "c", [1])
    with pytest.raises(QueueFullError):
        submit(engine, "d", [1])


def test_cancel_ends_the_stream_with_abort_and_frees_the_slot():
    engine, worker = make_engine(num_slots=1)
    first = submit(engine, "a", [1, 2, 3], max_tokens=40, ignore_eos=True)
    engine.step()
    engine.step()
    engine.cancel("a")
    second = submit(engine, "b", [5, 6], max_tokens=2, ignore_eos=True)
    engine.run_until_idle()
    assert first[-1].finish_reason == "abort"
    assert first[-1].num_output_tokens < 40
    assert second[-1].finish_reason == "length"
    assert text_of(second) == Letters().decode(expected_tokens([5, 6], 2, stop_at_eos=False))
    first_handle, second_handle = worker.released
    assert first_handle.slot == second_handle.slot
    assert first_handle.generation != second_handle.generation


def test_mixed_programs_serve_a_prompt_beside_decoders():
    engine, worker = make_engine()
    a = submit(engine, "a", [1, 2, 3], max_tokens=30, ignore_eos=True)
    for _ in range(4):
        engine.step()
    b = submit(engine, "b", [7] * 700, max_tokens=3, ignore_eos=True)
    engine.run_until_idle()
    assert a[-1].finish_reason == b[-1].finish_reason == "length"
    assert text_of(b) == Letters().decode(expected_tokens([7] * 700, 3, stop_at_eos=False))
    assert set(worker.frames) >= {"prefill", "decode"}


def test_a_failing_frame_fails_its_requests_and_the_engine_goes_on():
    engine, worker = make_engine()
    real_launch = worker.launch
    calls = {"n": 0}

    def flaky_launch(plan, fence, live):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("device fault")
        return real_launch(plan, fence, live)

    worker.launch = flaky_launch
    failed = submit(engine, "a", [1, 2, 3], max_tokens=4, ignore_eos=True)
    engine.run_until_idle()
    later = submit(engine, "b", [1, 2, 3], max_tokens=4, ignore_eos=True)
    engine.run_until_idle()
    assert failed[-1].finish_reason == "error"
    assert "device fault" in failed[-1].error
    assert later[-1].finish_reason == "length"
    assert engine.stats.snapshot().finished_by_reason == {"error": 1, "length": 1}


def speculative_engine():
    """The scripted worker under a fixed-width speculative catalog: a decode lane emits
    its whole verification width, so one frame publishes a burst of several tokens."""
    catalog = plan_catalog(
        get_recipe("qwen38"), LoadOptions(mixed_prefill=True, speculation="fixed")
    )
    scheduler = Scheduler(catalog, resources=Resources(num_request_slots=4))
    return Engine(scheduler, ScriptedWorker(), Letters(), max_context_tokens=4096)


@pytest.mark.parametrize("last", range(1, 9))
def test_usage_counts_the_tokens_up_to_the_one_completing_the_stop_string(last):
    """Issue 24, defect 5: a stop string completed inside a speculative burst ends the
    output at the token that completed it; the burst's later tokens are not output.
    (Without a stop this engine publishes bursts of 1, 6, 5, ... tokens.)"""
    prompt = [1, 2, 3]
    tokens = expected_tokens(prompt, 20, stop_at_eos=False)
    full = Letters().decode(tokens[:9])  # nine distinct letters, no EOS
    stop = full[last - 1 : last + 1]
    engine = speculative_engine()
    chunks = submit(engine, "a", prompt, max_tokens=20, stop=(stop,), ignore_eos=True)
    engine.run_until_idle()
    assert text_of(chunks) == full[: last - 1]
    assert chunks[-1].finish_reason == "stop"
    assert chunks[-1].num_output_tokens == last + 1
    assert [t for c in chunks for t in c.token_ids] == tokens[: last + 1]
