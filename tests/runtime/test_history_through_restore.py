"""Every declared continuation history through restore and resume (design: "Snapshot and
restore operations preserve partial pages and every declared continuation history").

A checkpoint carries model state, not the device sampling history that penalties and
min_tokens read; the worker rebuilds that history from the restored tokens (prompt
mask from the restored prompt, output counts from a resumed request's output), so a
request whose sampling reads its history restores and resumes like any other and
still generates what it would have with retention off (CPU, tiny random model).
"""

from __future__ import annotations

import pytest

from ignition.components.program_kinds import GraphKind
from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from tests.runtime.tiny import EOS, CharDecoder

HISTORY = {
    "repetition_penalty": 1.5,
    "presence_penalty": 1.0,
    "frequency_penalty": 0.5,
    "min_tokens": 4,
}
FIRST = tuple((11 * j) % 90 + 4 for j in range(40))
SECOND = FIRST + tuple((5 * j) % 90 + 4 for j in range(9))
RESUMED = {f"r{i}": tuple((7 * i + 5 * j) % 100 + 4 for j in range(20 + 5 * i)) for i in range(3)}
TIGHT_PAGES = 6  # 96 tokens of 16; the three requests reach 50, 55 and 60


pytestmark = pytest.mark.usefixtures("reference_kernels")


def _engine(model, catalog, snapshot_rows: int, num_pages: int | None = None):
    options = RuntimeOptions(
        num_slots=4,
        page_size=16,
        max_context_tokens=256,
        speculation="off",
        snapshot_rows=snapshot_rows,
        num_pages=num_pages,
    )
    engine = assemble_engine(model, catalog, CharDecoder(), [EOS], options)
    engine.restored = []
    engine.frame_listeners.append(
        lambda plan, _: engine.restored.extend(
            lane.checkpoint_tokens for lane in plan.lanes if plan.kind is GraphKind.RESTORE
        )
    )
    return engine


def _serve(engine, prompts: dict[str, tuple[int, ...]], max_tokens: int, **history):
    """Outputs and reported cached tokens of ``prompts`` submitted together."""
    outputs: dict[str, list[int]] = {}
    cached: dict[str, int] = {}
    for name, prompt in prompts.items():
        outputs[name] = []

        def sink(chunk, name=name):
            outputs[name].extend(chunk.token_ids)
            cached[name] = chunk.num_cached_tokens

        sampling = SamplingParams(
            max_tokens=max_tokens, temperature=0.0, ignore_eos=True, **history
        )
        engine.submit(GenerationRequest(name, prompt, sampling), sink)
    engine.run_until_idle(max_steps=20_000)
    return {n: tuple(ids) for n, ids in outputs.items()}, cached


def test_a_request_whose_sampling_reads_its_history_restores_with_the_output_of_retention_off(
    model, catalog
):
    off, on = _engine(model, catalog, 0), _engine(model, catalog, 8)
    turns = (("a", FIRST), ("b", SECOND))
    expected = [_serve(off, {name: p}, 8, **HISTORY)[0] for name, p in turns]
    assert expected[1] != _serve(off, {"plain": SECOND}, 8)[0]["plain"]  # penalties matter
    got = [_serve(on, {name: p}, 8, **HISTORY) for name, p in turns]
    assert [outputs for outputs, _ in got] == expected
    assert got[1][1]["b"] >= len(FIRST) and on.restored  # the second request restored


def test_a_preempted_request_whose_sampling_reads_its_history_resumes_from_its_snapshot(
    model, catalog
):
    expected, _ = _serve(_engine(model, catalog, 0), RESUMED, 30, **HISTORY)
    tight = _engine(model, catalog, 4, TIGHT_PAGES)
    outputs, _ = _serve(tight, RESUMED, 30, **HISTORY)
    assert tight.stats.snapshot().preemptions >= 1
    assert outputs == expected
    # the resume restored prompt plus output: it was not recomputed
    longest = max(len(p) for p in RESUMED.values())
    assert any(n > longest for n in tight.restored), tight.restored
