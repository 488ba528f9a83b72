"""Retention on versus off: random request sequences give identical greedy output.

Checkpoint retention may change how a prompt is executed (a restore instead of a
prefix's prefill, prefill cut at conversation anchors, snapshot copies between
frames) but never what a request generates. Each sequence is a series of waves of
requests submitted together: prompts share prefixes (so later waves restore earlier
checkpoints, and batched requests capture the same prefix), some repeat a prompt
under several ids (n > 1), some carry chat message ends (anchors inside the prompt),
and some are cancelled a few engine steps after submission. Every request that is
not cancelled must produce the same tokens with retention off, with ample rows, and
with two rows (constant eviction), through one long-lived engine each, with
speculation off and adaptive; and through a KV page pool small enough to force
preemption.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from ignition.runtime.retention.snapshot_rows import RowState
from tests.runtime.tiny import EOS, CharDecoder, tiny_catalog, tiny_model

pytestmark = pytest.mark.usefixtures("reference_kernels")

NUM_SEQUENCES = 8
TIGHT_PAGES = 7  # 112 tokens for four slots: concurrent requests preempt each other


@dataclass(frozen=True)
class Planned:
    name: str
    prompt: tuple[int, ...]
    ends: tuple[int, ...]
    max_tokens: int
    cancel_after: int | None  # engine steps after its wave was submitted


def _sequence(seed: int) -> list[list[Planned]]:
    rng = random.Random(seed)
    prefixes = [tuple(rng.randrange(4, 120) for _ in range(rng.randrange(3, 40))) for _ in "ab"]
    waves = []
    for w in range(rng.randrange(3, 6)):
        wave = []
        for r in range(rng.randrange(1, 4)):
            base = rng.choice(prefixes)
            tail = tuple(rng.randrange(4, 120) for _ in range(rng.randrange(1, 20)))
            prompt = base + tail
            ends = (len(base),) if rng.random() < 0.5 else ()
            cancel = rng.randrange(1, 6) if rng.random() < 0.2 else None
            copies = 3 if rng.random() < 0.2 else 1  # n > 1: one prompt, several ids
            for c in range(copies):
                name = f"s{seed}-w{w}-r{r}-c{c}"
                wave.append(Planned(name, prompt, ends, rng.randrange(1, 7), cancel))
            if rng.random() < 0.4:  # the next turn of this conversation starts from here
                prefixes.append(prompt)
        waves.append(wave)
    return waves


def _run(engine, waves: list[list[Planned]], **penalties: float) -> dict[str, tuple[int, ...]]:
    outputs: dict[str, list[int]] = {}
    finish: dict[str, str] = {}
    for wave in waves:
        for p in wave:
            outputs[p.name] = []

            def sink(chunk, name=p.name):
                outputs[name].extend(chunk.token_ids)
                if chunk.finish_reason:
                    finish[name] = chunk.finish_reason

            sampling = SamplingParams(
                max_tokens=p.max_tokens, temperature=0.0, ignore_eos=True, **penalties
            )
            engine.submit(GenerationRequest(p.name, p.prompt, sampling, p.ends), sink)
        for step in range(1, 4000):
            if not engine.has_work:
                break
            for p in wave:
                if p.cancel_after == step:
                    engine.cancel(p.name)
            engine.step()
        assert not engine.has_work
    cancelled = {p.name for wave in waves for p in wave if p.cancel_after is not None}
    for name, reason in finish.items():
        assert reason in ("length", "abort"), (name, reason)
    return {n: tuple(ids) for n, ids in outputs.items() if n not in cancelled}


@pytest.fixture(scope="module", params=["off", "adaptive"])
def engines(request):
    model = tiny_model(seed=5)
    catalog = tiny_catalog()

    def build(rows: int, pages: int | None = None):
        options = RuntimeOptions(
            num_slots=4,
            page_size=16,
            max_context_tokens=512,
            speculation=request.param,
            snapshot_rows=rows,
            num_pages=pages,
        )
        return assemble_engine(model, catalog, CharDecoder(), [EOS], options)

    engines = {rows: build(rows) for rows in (0, 8, 2)}
    engines["tight"] = build(4, TIGHT_PAGES)
    return engines


def test_retention_on_and_off_give_identical_greedy_output_over_random_sequences(engines):
    for seed in range(NUM_SEQUENCES):
        waves = _sequence(seed)
        expected = _run(engines[0], waves)
        for rows in (8, 2):
            assert _run(engines[rows], waves) == expected, (seed, rows)
    for rows in (8, 2):
        stats = engines[rows].stats.snapshot()
        assert stats.prefix_cache_hits > 0  # the sequences do reach restores
        cache = engines[rows].retention.cache
        assert cache.rows.count(RowState.ARMED) == cache.rows.count(RowState.COPYING) == 0
        assert not any(r.readers for r in cache.rows.rows)
    assert engines[2].retention.cache.num_evictions > 0


def test_a_page_pool_that_forces_preemption_changes_no_greedy_output(engines):
    """Preempted requests resume (from their snapshot or recomputed), never lost: the
    same random sequences through a pool too small for them give the same tokens."""
    for seed in range(100, 100 + NUM_SEQUENCES // 2):
        waves = _sequence(seed)
        assert _run(engines["tight"], waves) == _run(engines[0], waves), seed
    tight = engines["tight"]
    assert tight.stats.snapshot().preemptions > 0
    assert tight.scheduler.pool.num_free_pages == TIGHT_PAGES and not tight.preemption.resume


PENALTIES = {"repetition_penalty": 1.5, "presence_penalty": 1.0, "frequency_penalty": 0.5}


def test_penalties_see_the_whole_history_through_retention_and_preemption(engines):
    """Penalties depend on every prompt and output token a request has seen, which a
    restored checkpoint or a resumed snapshot does not carry: such a request prefills
    instead, so its tokens equal those of a request that never left the device."""
    for seed in range(200, 200 + NUM_SEQUENCES // 2):
        waves = _sequence(seed)
        expected = _run(engines[0], waves, **PENALTIES)
        assert expected != _run(engines[0], waves), seed  # the penalties do change tokens
        for key in (8, "tight"):
            assert _run(engines[key], waves, **PENALTIES) == expected, (seed, key)
