"""The engine loop with the real Helios scheduler and a scripted worker.

The worker stands in for the model: token t+1 = (t * 7 + 3) % 26 over a
letters-only "vocabulary", so outputs are deterministic and checkable, and the
tests exercise admission, publication, stop buffering, EOS, output limits,
cancellation and slot reuse without torch.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ignition.components.capacity import plan_catalog
from ignition.helios import CompletionRecord, ExecutionTiming, LaneRole, Resources, Scheduler
from ignition.recipes import LoadOptions, get_recipe
from ignition.runtime.engine import Engine, FrameResult
from ignition.runtime.requests import GenerationRequest, QueueFullError, SamplingParams

EOS = 25  # "z"


class Letters:
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(97 + i) for i in ids if not (skip_special_tokens and i == EOS))


def successor(token: int) -> int:
    return (token * 7 + 3) % 26


class ScriptedWorker:
    """Keeps each slot's last token on its side, as a device-resident pending token, so
    that a second queued decode frame continues from the first one's output."""

    def __init__(self) -> None:
        self.released = []
        self.frames = []
        self.last: dict = {}

    def launch(self, plan, fence, live):
        records = []
        for lane in plan.lanes:
            request = live[lane.handle]
            if lane.role is LaneRole.PROMPT:
                ids = [successor(request.prompt_ids[-1])] if lane.max_advance_tokens else []
                if ids:
                    self.last[lane.handle] = ids[-1]
                records.append(CompletionRecord(lane.handle, lane.num_prompt_tokens, tuple(ids)))
                continue
            ids, last = [], self.last[lane.handle]
            stops_at_eos = not request.request.sampling.ignore_eos
            for _ in range(min(lane.query_length, lane.max_advance_tokens)):
                last = successor(last)
                ids.append(last)
                if last == EOS and stops_at_eos:
                    break
            self.last[lane.handle] = last
            finished = stops_at_eos and EOS in ids
            records.append(CompletionRecord(lane.handle, 0, tuple(ids), is_finished=finished))
        self.frames.append(plan.descriptor.kind.value)
        return FrameResult(tuple(records), ExecutionTiming(device_ns=1_000_000, wall_ns=1_000_000))

    def wait(self, pending):
        return pending

    def release(self, handle):
        self.released.append(handle)
        self.last.pop(handle, None)


def make_engine(num_slots: int = 4, max_waiting: int = 8, mixed: bool = True):
    catalog = plan_catalog(
        get_recipe("qwen38"), LoadOptions(mixed_prefill=mixed, speculation="off")
    )
    scheduler = Scheduler(catalog, resources=Resources(num_request_slots=num_slots))
    worker = ScriptedWorker()
    engine = Engine(
        scheduler,
        worker,
        Letters(),
        max_context_tokens=4096,
        eos_token_ids=[EOS],
        max_waiting=max_waiting,
    )
    return engine, worker


def expected_tokens(prompt: Sequence[int], n: int, stop_at_eos: bool = True) -> list[int]:
    out, last = [], prompt[-1]
    for _ in range(n):
        last = successor(last)
        out.append(last)
        if stop_at_eos and last == EOS:
            break
    return out


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
    engine, _ = make_engine(max_waiting=2)
    submit(engine, "a", [1])
    submit(engine, "b", [1])
    with pytest.raises(QueueFullError):
        submit(engine, "c", [1])


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
