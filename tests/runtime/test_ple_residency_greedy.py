"""Issue 23 through the real engine on a tiny random Qwen3.8-Flash-Next (qwen4_exp) checkpoint:
the n-gram table served from the device, from host memory and from disk behind a tiny row
cache generates the same greedy tokens, with speculation off, fixed and adaptive, mixed
programs and prefix retention; rows the host knows are staged before launch, the rest
(drafts) reach the program through its mailbox; a slow host worker on that path shows in the
frame's readiness and is subtracted from the cost sample only."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from ignition.components.capacity import plan_catalog
from ignition.components.catalog import Catalog
from ignition.components.program_kinds import GraphKind
from ignition.helios import LaneRole
from ignition.recipes import LoadOptions, get_recipe
from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.ple.delivery import PleOptions
from ignition.runtime.ple.model import open_model_ple, ple_layers
from tests.runtime.test_retention_differential import Planned, _run, _sequence
from tests.runtime.tiny import EOS, CharDecoder

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("reference_kernels")]
pytest.importorskip("transformers")

CPU = torch.device("cpu")
DELAY_S = 0.02
TINY_CACHE = 16 * 64  # a handful of rows: the disk residency misses and evicts constantly


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from ignition.model.weights import load_checkpoint
    from tests.model.hf_checkpoints import write_qwen4_exp

    path = tmp_path_factory.mktemp("qwen4-ple")
    write_qwen4_exp(path, seed=5, mtp=True)
    return path, load_checkpoint(path).model


@pytest.fixture(scope="module")
def catalog():
    full = plan_catalog(
        get_recipe("qwen4-exp"), LoadOptions(mixed_prefill=True, max_prefill_chunk=64)
    )
    text_only = tuple(d for d in full.descriptors if d.kind is not GraphKind.VISION)
    return Catalog(full.recipe, full.options, text_only)


def waves() -> list[list[Planned]]:
    """Two turns sharing a prefix (the second restores it), prompts longer than one chunk."""
    base = tuple((7 * i + 3) % 110 + 4 for i in range(70))
    first = [Planned("a", base, (len(base),), 6, None), Planned("b", base[:21], (), 5, None)]
    second = [
        Planned("c", (*base, 9, 41, 77), (), 6, None),
        Planned("d", tuple((5 * i + 1) % 100 + 4 for i in range(18)), (), 4, None),
    ]
    return [first, second]


def engine_at(
    checkpoint, catalog, residency: str, speculation: str, mixed: bool = True, pages=None
):
    path, model = checkpoint
    options = RuntimeOptions(
        num_slots=4, page_size=16, max_context_tokens=256, speculation=speculation,
        mixed=mixed, snapshot_rows=4, checkpoint_payoff=False, num_pages=pages,
    )  # fmt: skip
    engine = assemble_engine(model, catalog, CharDecoder(), [EOS], options)
    ple = open_model_ple(
        path, PleOptions(residency, cache_bytes=TINY_CACHE), CPU, engine.worker, model
    )
    return engine, ple


def staged_input(engine):
    return next(
        p.inputs.ple for p, _ in engine.worker.programs.values() if getattr(p.inputs, "ple", None)
    )


@pytest.mark.parametrize("speculation", ["off", "fixed", "adaptive"])
def test_greedy_output_is_the_same_at_every_residency(checkpoint, catalog, speculation):
    outputs, stats = {}, {}
    for residency in ("device", "host", "disk"):
        engine, ple = engine_at(checkpoint, catalog, residency, speculation)
        outputs[residency] = _run(engine, waves())
        stats[residency] = (ple.stats.snapshot(), engine.stats.snapshot(), staged_input(engine))
        if ple.mailbox is not None:
            ple.mailbox.close()
    assert outputs["host"] == outputs["device"]
    assert outputs["disk"] == outputs["device"]
    device, _, device_staged = stats["device"]
    assert device.rows_gathered == 0 and not device_staged.is_enabled  # the program gathers
    for residency in ("host", "disk"):
        ple, engine_stats, staged = stats[residency]
        assert ple.rows_gathered > 0 and ple.frames > 0
        assert engine_stats.prefix_cache_hits > 0  # the second turn restored the first
        if speculation != "off":  # drafts' rows are made inside the program
            assert staged.num_resolved[0] > 0
    disk = stats["disk"][0]
    assert disk.cache_misses > 0 and disk.cache_hits > 0


def test_greedy_output_is_the_same_without_mixed_programs(checkpoint, catalog):
    runs = {}
    for residency in ("device", "disk"):
        engine, ple = engine_at(checkpoint, catalog, residency, "adaptive", mixed=False)
        runs[residency] = _run(engine, waves())
        if ple.mailbox is not None:
            ple.mailbox.close()
    assert runs["disk"] == runs["device"]


def test_preemption_keeps_the_greedy_output_of_a_table_on_disk(checkpoint, catalog):
    """A page pool too small for every request: preempted requests replay their output as
    prompt, and the host derives their n-gram context from the replayed sequence."""
    sequence = _sequence(0)  # the retention differential's waves (issue 31's preemption test)
    expected = _run(engine_at(checkpoint, catalog, "device", "adaptive")[0], sequence)
    engine, ple = engine_at(checkpoint, catalog, "disk", "adaptive", pages=7)
    assert _run(engine, sequence) == expected
    ple.mailbox.close()
    assert engine.stats.snapshot().preemptions > 0


def test_serving_drops_the_models_own_table_once_rows_are_delivered(checkpoint, catalog):
    from ignition.model.weights import load_checkpoint

    path, _ = checkpoint
    expected = _run(engine_at(checkpoint, catalog, "device", "off")[0], waves())
    model = load_checkpoint(path).model  # its own copy: the shared one keeps its table
    options = RuntimeOptions(
        num_slots=4, page_size=16, max_context_tokens=256, speculation="off", snapshot_rows=4
    )
    engine = assemble_engine(model, catalog, CharDecoder(), [EOS], options)
    ple = open_model_ple(path, PleOptions("host"), CPU, engine.worker, model, True)
    assert all(p.ngram_embedding.weight.numel() == 0 for p in ple_layers(model))
    assert _run(engine, waves()) == expected
    ple.mailbox.close()


def test_the_host_stages_every_row_it_can_name(checkpoint, catalog):
    """With speculation off the program asks its mailbox only for pending tokens whose
    previous frame the host had not read when it launched: a frame whose every lane the host
    could name (prompt chunks, read pending tokens, restored prefixes included) resolves
    nothing inside the program, so the host's n-gram context matches the device's."""
    engine, ple = engine_at(checkpoint, catalog, "host", "off")
    worker = engine.worker
    asked: list[int] = []
    resolve = worker.ple.resolve_inside

    def counting(row_ids):
        asked[-1] += row_ids.numel()
        return resolve(row_ids)

    staged_input(engine).resolve = counting
    program_executor = worker.executors[GraphKind.DECODE]
    read_pending = program_executor.read_pending
    named: list[bool] = []

    def spy(plan, live):
        known = read_pending(plan, live)
        named.append(
            all(lane.role is LaneRole.PROMPT or lane.handle in known for lane in plan.lanes)
        )
        asked.append(0)
        return known

    program_executor.read_pending = spy
    _run(engine, waves())
    ple.mailbox.close()
    fully_named = [n for n, is_named in zip(asked, named, strict=True) if is_named]
    assert len(fully_named) >= 5 and not any(fully_named)
    assert engine.stats.snapshot().prefix_cache_hits > 0


class SlowWhenAsked:
    """A host worker that is slow only for rows the program asks for from inside."""

    def __init__(self, inner) -> None:
        self.inner, self.layout, self.stats = inner, inner.layout, inner.stats
        self.residency = inner.residency
        self.is_slow = threading.Event()

    def gather(self, row_ids, out) -> None:
        if self.is_slow.is_set():
            time.sleep(DELAY_S)
        self.inner.gather(row_ids, out)


def test_a_slow_host_worker_on_the_draft_path_is_subtracted_from_the_cost_sample_only(
    checkpoint, catalog
):
    engine, ple = engine_at(checkpoint, catalog, "host", "fixed")
    slow = SlowWhenAsked(ple.mailbox.store)
    ple.mailbox.store = slow
    worker, scheduler = engine.worker, engine.scheduler
    resolve = worker.ple.resolve_inside

    def slowly(row_ids):
        slow.is_slow.set()
        try:
            return resolve(row_ids)
        finally:
            slow.is_slow.clear()

    staged_input(engine).resolve = slowly
    samples, seen = [], []
    observe, complete = scheduler.costs.observe, scheduler.complete

    def spy_observe(d, sample_ns, now_ns):
        samples.append(sample_ns)
        return observe(d, sample_ns, now_ns)

    def spy_complete(fence, report):
        samples.clear()
        tokens = complete(fence, report)
        charged = {h: p.duration_ms for h, p in scheduler._publishable.items()}
        seen.append((report.timing, list(samples), charged))
        return tokens

    scheduler.costs.observe, scheduler.complete = spy_observe, spy_complete
    frames = []
    engine.frame_listeners.append(lambda plan, result: frames.append((plan, result)))
    _run(engine, [waves()[1][:1]])
    ple.mailbox.close()

    rounds = [r for p, r in frames if p.descriptor.proposal_depth > 0 and len(r.readiness) > 1]
    assert rounds, "no speculative round asked its mailbox for draft rows"
    for result in rounds:
        timing = result.timing
        drafts = result.readiness[-1]  # the in-program delivery comes after the known rows
        assert drafts.exposed_ns >= DELAY_S * 1e9  # the frame's own timestamps hold the stall
        assert timing.readiness_stall_ns == sum(r.exposed_ns for r in result.readiness)
        assert timing.device_ns > timing.readiness_stall_ns  # the interval holds the wait
        (sample,), charged = next((s, c) for t, s, c in seen if t == timing)
        assert sample == timing.device_ns - timing.readiness_stall_ns  # cost: subtracted
        for charged_ms in charged.values():  # service: the raw interval, stall included
            assert charged_ms * 1e6 >= timing.device_ns - 1
