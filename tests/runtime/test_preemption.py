"""Preemption and resume through the real model runtime (CPU, tiny model): a KV page
pool too small for every request at once forces a resident request out; it resumes
later (restore plus prefill of the rest, or recomputation without retention) and its
greedy output equals the unpreempted one. Preempted requests are resumed, never lost."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from ignition.components.program_kinds import GraphKind
from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from ignition.runtime.retention.snapshot_rows import RowState
from tests.runtime.tiny import EOS, CharDecoder

PROMPTS = {f"r{i}": tuple((7 * i + 5 * j) % 100 + 4 for j in range(20 + 5 * i)) for i in range(3)}
MAX_TOKENS = 30
TIGHT_PAGES = 6  # 96 tokens; the three requests reach 50, 55 and 60


pytestmark = pytest.mark.usefixtures("reference_kernels")


def _engine(model, catalog, num_pages, snapshot_rows, speculation="off"):
    options = RuntimeOptions(
        num_slots=4,
        page_size=16,
        max_context_tokens=256,
        speculation=speculation,
        snapshot_rows=snapshot_rows,
        num_pages=num_pages,
    )
    return assemble_engine(model, catalog, CharDecoder(), [EOS], options)


def _submit_all(engine, outputs, finishes, prompts=PROMPTS, max_tokens=MAX_TOKENS):
    for name, prompt in prompts.items():
        outputs[name] = []

        def sink(chunk, name=name):
            outputs[name].extend(chunk.token_ids)
            if chunk.finish_reason:
                finishes[name] = (chunk.finish_reason, chunk.error)

        sampling = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
        engine.submit(GenerationRequest(name, prompt, sampling), sink)


def _run(engine):
    outputs, finishes = {}, {}
    _submit_all(engine, outputs, finishes)
    engine.run_until_idle(max_steps=20_000)
    return outputs, finishes


def _unpreempted(model, catalog, speculation="off"):
    outputs, finishes = _run(_engine(model, catalog, None, 0, speculation))
    assert all(reason == "length" for reason, _ in finishes.values())
    return outputs


@pytest.fixture(scope="module")
def unpreempted(model, catalog):
    return _unpreempted(model, catalog)


@pytest.mark.parametrize("speculation", ["off", "adaptive"])
def test_a_preempted_decoder_resumes_from_its_snapshot_with_the_unpreempted_output(
    model, catalog, unpreempted, speculation
):
    if speculation != "off":
        unpreempted = _unpreempted(model, catalog, speculation)
    engine = _engine(model, catalog, TIGHT_PAGES, snapshot_rows=4, speculation=speculation)
    restores = []
    engine.frame_listeners.append(
        lambda plan, _: restores.extend(
            lane.checkpoint_tokens for lane in plan.lanes if plan.kind is GraphKind.RESTORE
        )
    )
    outputs, finishes = _run(engine)
    stats = engine.stats.snapshot()
    assert stats.preemptions >= 1
    assert outputs == unpreempted
    assert all(reason == "length" for reason, _ in finishes.values())
    # The resume restored prompt plus output (not just a prompt checkpoint).
    assert any(n > max(len(p) for p in PROMPTS.values()) for n in restores), restores
    assert stats.preempted == 0 and not engine.preemption.resume
    rows = engine.retention.cache.rows
    assert rows.count(RowState.ARMED) == rows.count(RowState.COPYING) == 0


def test_without_retention_a_preempted_request_is_recomputed_with_the_same_output(
    model, catalog, unpreempted
):
    engine = _engine(model, catalog, TIGHT_PAGES, snapshot_rows=0)
    outputs, finishes = _run(engine)
    stats = engine.stats.snapshot()
    assert stats.preemptions >= 1 and "restore" not in stats.executions_by_kind
    assert outputs == unpreempted
    assert all(reason == "length" for reason, _ in finishes.values())
    assert engine.scheduler.pool.num_free_pages == TIGHT_PAGES  # every page came back


def test_cancelling_a_request_while_it_waits_to_resume_aborts_it_and_frees_everything(
    model, catalog, unpreempted
):
    engine = _engine(model, catalog, TIGHT_PAGES, snapshot_rows=4)
    outputs, finishes = {}, {}
    _submit_all(engine, outputs, finishes)
    cancelled = None
    for _ in range(20_000):
        if not engine.has_work:
            break
        if cancelled is None and engine.preemption.resume:
            cancelled = engine.preemption.resume[0].request.request_id
            engine.cancel(cancelled)
        engine.step()
    assert cancelled is not None and finishes[cancelled][0] == "abort"
    for name, ids in outputs.items():
        if name != cancelled:
            assert finishes[name][0] == "length" and ids == unpreempted[name]
    assert engine.scheduler.pool.num_free_pages == TIGHT_PAGES
    rows = engine.retention.cache.rows
    assert rows.count(RowState.ARMED) == rows.count(RowState.COPYING) == 0


def test_a_lone_request_the_page_pool_cannot_hold_ends_with_an_error_naming_the_pool(
    model, catalog
):
    engine = _engine(model, catalog, 2, snapshot_rows=4)  # 32 tokens of KV
    outputs, finishes = {}, {}
    _submit_all(engine, outputs, finishes, {"big": PROMPTS["r2"]}, max_tokens=20)
    engine.run_until_idle(max_steps=2_000)
    reason, error = finishes["big"]
    assert reason == "error" and "KV page pool (2 pages of 16 tokens)" in error


def _record_preemptions(engine):
    """Per preemption: the request, Helios's remaining output in its view at that moment,
    the value the runtime carries to the resume, and max_tokens less the output so far."""
    seen = []
    preempt = engine.table.preempt

    def recording(live, remaining_output):
        view = engine.scheduler.request(live.handle)
        budget = live.request.sampling.max_tokens - len(live.output_ids)
        seen.append((live.request.request_id, view.remaining_output, remaining_output, budget))
        preempt(live, remaining_output)

    engine.table.preempt = recording
    return seen


@pytest.mark.parametrize("snapshot_rows", [4, 0])
def test_a_preempted_request_carries_helios_remaining_output_and_ends_at_max_tokens(
    model, catalog, unpreempted, snapshot_rows
):
    engine = _engine(model, catalog, TIGHT_PAGES, snapshot_rows=snapshot_rows)
    seen = _record_preemptions(engine)
    outputs, finishes = {}, {}
    _submit_all(engine, outputs, finishes)
    engine.run_until_idle(max_steps=20_000)
    assert seen and engine.stats.snapshot().preemptions >= 1
    for _, helios, carried, budget in seen:  # one count, read from Helios at preemption
        assert carried == helios == budget
    assert outputs == unpreempted  # greedy output identical to the unpreempted run
    assert all(len(ids) == MAX_TOKENS for ids in outputs.values())
    assert all(reason == "length" for reason, _ in finishes.values())


def test_the_resume_takes_its_output_limit_from_the_scheduler_view_not_its_own_count(
    model, catalog, unpreempted
):
    """Helios's view answers SHIFT tokens fewer than it holds: a resume that reads the view
    ends SHIFT tokens short per preemption; one that counted max_tokens less its own
    output would run to max_tokens."""
    shift = 3
    engine = _engine(model, catalog, TIGHT_PAGES, snapshot_rows=4)
    seen = _record_preemptions(engine)
    request = engine.scheduler.request

    def shifted(handle):
        view = request(handle)
        return view and replace(view, remaining_output=view.remaining_output - shift)

    engine.scheduler.request = shifted
    outputs, finishes = {}, {}
    _submit_all(engine, outputs, finishes)
    engine.run_until_idle(max_steps=20_000)
    preempted = Counter(name for name, *_ in seen)
    assert preempted
    for name, ids in outputs.items():
        assert finishes[name][0] == "length"
        assert ids == unpreempted[name][: MAX_TOKENS - shift * preempted[name]], name
