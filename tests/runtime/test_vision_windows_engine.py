"""Issue 13, vision windows through the engine: a prompt whose images exceed the prepared
feature storage is prefilled window by window; the decision trace shows each window's
vision prerequisite, the private snapshot at the window boundary and its restore into a
fresh request generation, and the answer equals transformers' greedy generate (the
logical request keeps prompt, seed, sampling and usage)."""

from __future__ import annotations

import pytest

from ignition.components.program_kinds import GraphKind
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from ignition.runtime.retention.snapshot_rows import RowState
from ignition.serving.engine import ServeOptions, open_engine
from tests.server.vision_checkpoint import NUM_TOKENS

pytest.importorskip("transformers")


def serve_once(
    bundle, expanded, images, capacity, snapshot_rows=0, sampling=None, speculation=None
):
    _, engine = open_engine(
        ServeOptions(
            artifacts=str(bundle),
            device="cpu",
            max_context_tokens=2048,
            vision_feature_capacity=capacity,
            snapshot_rows=snapshot_rows,
        )
    )
    chunks = []
    sampling = sampling or SamplingParams(max_tokens=NUM_TOKENS, temperature=0)
    request = GenerationRequest("windowed", tuple(expanded), sampling, images=images)
    engine.submit(request, chunks.append)
    engine.run_until_idle()
    return engine, chunks


def test_a_two_window_prompt_snapshots_privately_and_restores_into_a_fresh_generation(vision_case):
    bundle, expected, expanded, images, _ = vision_case
    engine, chunks = serve_once(bundle, expanded, images, capacity=8, snapshot_rows=2)
    ids = [t for c in chunks for t in c.token_ids]
    assert ids[: len(expected)] == expected
    assert chunks[-1].num_prompt_tokens == len(expanded)
    trace = list(engine.scheduler.trace)
    snapshots = [e for e in trace if e.kind == GraphKind.SNAPSHOT.value]
    restores = [e for e in trace if e.kind == GraphKind.RESTORE.value]
    assert len(snapshots) == 1 and len(restores) == 1
    (snap,), (restore,) = snapshots[0].lanes, restores[0].lanes
    assert snap["role"] == "snapshot" and restore["role"] == "restore"
    assert restore["generation"] > snap["generation"]
    assert snapshots[0].fence < restores[0].fence
    boundary = images.spans[1].start  # the second window's first dependency
    prompt = [e for e in trace if any(lane["role"] == "prompt" for lane in e.lanes)]
    before = sum(
        lane["prompt_tokens"]
        for e in prompt
        if e.fence < snapshots[0].fence
        for lane in e.lanes
        if lane["role"] == "prompt"
    )
    assert before == boundary  # prefill stopped before the next window's first image
    # each window's vision prerequisite runs in its own generation, before its prefill
    vision = [e for e in trace if e.kind == GraphKind.VISION.value]
    assert [e.lanes[0]["generation"] for e in vision] == [snap["generation"], restore["generation"]]
    assert vision[0].fence < prompt[0].fence and restores[0].fence < vision[1].fence
    assert vision[1].fence < min(e.fence for e in prompt if e.fence > restores[0].fence)
    cache = engine.retention.cache
    assert cache is not None and cache.counters.published == 0  # private: nothing published
    assert cache.rows.count(RowState.RETAINED) == 0


def test_one_window_needs_no_snapshot(vision_case):
    bundle, expected, expanded, images, _ = vision_case
    engine, chunks = serve_once(bundle, expanded, images, capacity=0)
    assert [t for c in chunks for t in c.token_ids][: len(expected)] == expected
    assert not any(e.kind in ("snapshot", "restore") for e in engine.scheduler.trace)


def test_the_sampling_history_carries_across_window_generations(vision_case):
    """Penalties see every prompt token of the logical request, not just the current
    window's: the windowed answer equals the one-window answer with the same penalties."""
    bundle, expected, expanded, images, _ = vision_case
    # A penalty below 1 favours tokens already seen, so the answer leans on the prompt's
    # tokens, the first window's included.
    sampling = SamplingParams(max_tokens=NUM_TOKENS, temperature=0, repetition_penalty=0.01)
    _, whole = serve_once(bundle, expanded, images, capacity=0, sampling=sampling)
    _, windowed = serve_once(
        bundle, expanded, images, capacity=8, snapshot_rows=2, sampling=sampling
    )
    ids = [t for c in whole for t in c.token_ids]
    assert ids[: len(expected)] != expected  # the penalties do change the answer
    assert [t for c in windowed for t in c.token_ids] == ids
