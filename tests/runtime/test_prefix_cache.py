"""Prefix caching of hybrid state through the real model runtime (CPU, tiny model):
a second turn that repeats the first conversation restores a retained checkpoint as a
prerequisite, prefills only the rest, and produces the same greedy tokens as with
retention off."""

from __future__ import annotations

import pytest

from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from tests.runtime.tiny import EOS, CharDecoder

USER_1 = [(7 * i + 3) % 120 + 4 for i in range(150)]
TURN_1 = [*USER_1, 60, 61, 62]  # the user message, then a generation prompt


pytestmark = pytest.mark.usefixtures("reference_kernels")


def _run(engine, name, prompt, ends, max_tokens=8):
    out = {"ids": [], "cached": 0, "finish": None}

    def sink(chunk):
        out["ids"].extend(chunk.token_ids)
        out["cached"] = chunk.num_cached_tokens
        if chunk.finish_reason:
            out["finish"] = chunk.finish_reason

    sampling = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    engine.submit(GenerationRequest(name, tuple(prompt), sampling, tuple(ends)), sink)
    engine.run_until_idle(max_steps=4000)
    return out


def _two_turns(model, catalog, snapshot_rows: int, speculation: str):
    options = RuntimeOptions(
        num_slots=4,
        page_size=64,
        max_context_tokens=1024,
        speculation=speculation,
        mixed=True,
        snapshot_rows=snapshot_rows,
    )
    engine = assemble_engine(model, catalog, CharDecoder(), [EOS], options)
    first = _run(engine, "turn-1", TURN_1, [len(USER_1)])
    turn_2 = [*TURN_1, *first["ids"], 70, *range(10, 40), 60, 61, 62]
    ends = [len(USER_1), len(TURN_1) + len(first["ids"]) + 1, len(turn_2) - 3]
    second = _run(engine, "turn-2", turn_2, ends)
    return first, second, turn_2, engine


@pytest.mark.parametrize("speculation", ["off", "adaptive"])
def test_second_turn_restores_the_shared_prefix_with_identical_greedy_output(
    model, catalog, speculation
):
    off_1, off_2, _, _ = _two_turns(model, catalog, 0, speculation)
    on_1, on_2, _, engine = _two_turns(model, catalog, 4, speculation)
    assert on_1["ids"] == off_1["ids"] and on_2["ids"] == off_2["ids"]
    assert off_2["cached"] == 0
    shared = len(TURN_1) + len(on_1["ids"])  # the whole first conversation
    assert on_2["cached"] >= 0.9 * shared, (on_2["cached"], shared)
    stats = engine.stats.snapshot()
    assert stats.prefix_cache_hits == 1
    assert stats.prefix_cache_restored_tokens == on_2["cached"]
    assert stats.executions_by_kind.get("restore") == 1
    assert on_2["finish"] == "length"
    print(speculation, "cached", on_2["cached"], "of", shared, dict(stats.executions_by_kind))


def _submit(engine, name, prompt, max_tokens, outputs, ends=()):
    outputs[name] = []
    sampling = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    request = GenerationRequest(name, tuple(prompt), sampling, tuple(ends))
    engine.submit(request, lambda chunk: outputs[name].extend(chunk.token_ids))


def _restore_into_a_fresh_slot(model, catalog, snapshot_rows: int):
    """A 6-token prompt is captured at its end in slot 0; later its continuation is
    restored into slot 1 (slot 0 is busy with another request) and gets other pages."""
    options = RuntimeOptions(
        num_slots=4,
        page_size=16,
        max_context_tokens=256,
        speculation="off",
        snapshot_rows=snapshot_rows,
    )
    engine = assemble_engine(model, catalog, CharDecoder(), [EOS], options)
    outputs: dict[str, list[int]] = {}
    prefix = [5, 6, 7, 8, 9, 10]
    _submit(engine, "first", prefix, 2, outputs)
    engine.run_until_idle(max_steps=4000)
    _submit(engine, "busy", range(20, 60), 12, outputs)
    _submit(engine, "restored", [*prefix, 11], 4, outputs)
    engine.run_until_idle(max_steps=4000)
    return outputs, engine


def test_a_restore_writes_the_prefix_into_the_pages_just_assigned_to_its_slot(model, catalog):
    """Snapshot and restore preserve partial pages: the restore must write into the pages
    the runtime has just given the slot, not the ones the device table still named (the
    defect behind the server's restored 'import os' completion)."""
    off, _ = _restore_into_a_fresh_slot(model, catalog, 0)
    on, engine = _restore_into_a_fresh_slot(model, catalog, 4)
    assert engine.stats.snapshot().prefix_cache_hits == 1
    assert on == off


def test_cancellation_mid_copy_keeps_the_row_until_completion_and_leaks_none(model, catalog):
    """Armed destinations and in-flight copies retain their rows through GPU completion
    and cancellation; afterwards nothing stays armed or copying."""
    from ignition.components.program_kinds import GraphKind
    from ignition.runtime.retention.snapshot_rows import RowState

    options = RuntimeOptions(
        num_slots=4, page_size=64, max_context_tokens=1024, speculation="off", snapshot_rows=2
    )
    engine = assemble_engine(model, catalog, CharDecoder(), [EOS], options)
    rows = engine.retention.cache.rows
    seen = {}
    wait = engine.worker.wait

    def wait_cancelling(launched):
        plan = launched.plan
        if plan.kind is GraphKind.SNAPSHOT and "state" not in seen:
            copying = [r.index for r in rows.rows if r.state is RowState.COPYING]
            engine.lifecycle.abort("victim")  # the client leaves while the copy runs
            seen["state"] = [rows.rows[i].state for i in copying]
        return wait(launched)

    engine.worker.wait = wait_cancelling
    finish = _run(engine, "victim", TURN_1, [len(USER_1)])["finish"]
    assert finish == "abort"
    assert seen["state"] == [RowState.COPYING]  # still owned after the cancellation
    assert rows.count(RowState.ARMED) == rows.count(RowState.COPYING) == 0
    assert rows.count(RowState.RETAINED) == 0  # cancellation suppressed publication
    # The rows serve the next request normally.
    again = _run(engine, "next", TURN_1, [len(USER_1)])
    assert again["finish"] == "length" and rows.count(RowState.RETAINED) >= 1


def test_the_terminal_snapshot_and_its_publication_precede_the_visible_finish(
    model, catalog, monkeypatch
):
    """Successful snapshot completion and cache publication precede admission of an
    immediate continuation: the finish reaches the client only after them.

    Funding depends on measured times (test_retention.py covers it); here every terminal
    capture is funded so that only the ordering is under test.
    """
    from ignition.runtime.retention.captures import CheckpointAllowance
    from ignition.runtime.retention.snapshot_rows import RowState

    monkeypatch.setattr(CheckpointAllowance, "try_terminal", lambda self, cost_ns: True)

    options = RuntimeOptions(
        num_slots=4, page_size=64, max_context_tokens=1024, speculation="off", snapshot_rows=4
    )
    engine = assemble_engine(model, catalog, CharDecoder(), [EOS], options)
    rows = engine.retention.cache.rows
    events = []
    engine.frame_listeners.append(
        lambda plan, _: events.append(("frame", tuple(lane.role.value for lane in plan.lanes)))
    )

    def sink(chunk):
        if chunk.finish_reason:
            retained = [r.length for r in rows.rows if r.state is RowState.RETAINED]
            events.append(("finish", max(retained, default=0)))

    sampling = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)
    engine.submit(GenerationRequest("a", tuple(TURN_1), sampling, (len(USER_1),)), sink)
    engine.run_until_idle(max_steps=4000)
    (finish,) = [e for e in events if e[0] == "finish"]
    assert finish[1] == len(TURN_1) + 6 - 1  # the terminal checkpoint is already published
    assert ("frame", ("terminal",)) in events


def test_a_stop_inside_an_accepted_burst_marks_the_slot_unfit_for_a_terminal_capture():
    """The device committed past the published output, so the slot's state is no longer
    prompt + output: the worker remembers it on the host (launch never reads the device)."""
    from ignition.helios import LaneRole, LaneWork, RequestHandle
    from ignition.runtime.executors.results import completion_record

    overrun = set()
    handle = RequestHandle(0, 1)
    lane = LaneWork(handle, 0, LaneRole.DECODE, 0, 3, 3.0, 1.0, 3, 3, 1.0)
    record = completion_record(lane, [5, EOS, 7], frozenset({EOS}), overrun)
    assert record.token_ids == (5, EOS) and record.is_finished
    assert handle in overrun
    other = RequestHandle(1, 1)
    other_lane = LaneWork(other, 0, LaneRole.DECODE, 0, 2, 2.0, 1.0, 2, 2, 1.0)
    completion_record(other_lane, [5, 6], set(), overrun)
    assert other not in overrun
