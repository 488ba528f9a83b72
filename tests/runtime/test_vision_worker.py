"""Issue 13, worker binding through prepared programs, without the scheduler's choices: an
image request's prompt goes through mixed speculative programs in three chunks (the
second stops before the second image's span) beside a decoding text request, then decodes
in speculative rounds with MTP drafts; its tokens equal transformers' greedy generate.
Chunks are fixed by hand so that mixed image chunks and speculation after the images are
exercised every run (under Helios they depend on measured timings)."""

from __future__ import annotations

import itertools

import pytest

from ignition.helios import Fence, LaneRole, LaneWork, RequestHandle, ScheduledPlan, SelectionReason
from ignition.runtime.requests.detokenize import IncrementalDetokenizer
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from ignition.runtime.requests.table import LiveRequest
from ignition.serving.engine import ServeOptions, open_engine
from tests.server.vision_checkpoint import NUM_TOKENS

pytest.importorskip("transformers")

IMAGE_SLOT, TEXT_SLOT = 0, 1


def lane(slot: int, role: LaneRole, prompt: int = 0, query: int = 0, advance: int = 1):
    return LaneWork(
        handle=RequestHandle(slot, 1),
        epoch=0,
        role=role,
        num_prompt_tokens=prompt,
        query_length=query,
        expected_output_tokens=float(advance),
        expected_deliveries=float(advance),
        max_advance_tokens=advance,
        reserved_tokens=prompt + query,
        value=1.0,
    )


def pick(engine, kind: str, **capacities):
    for d in engine.scheduler.descriptors:
        if d.kind.value == kind and all(getattr(d, k) == v for k, v in capacities.items()):
            return d
    raise AssertionError(f"no {kind} program with {capacities}")


def run(worker, live, d, lanes):
    plan = ScheduledPlan(d, tuple(lanes), -1, 0, 0, 1.0, 0.0, SelectionReason.DISCOVERY, True, 0, 0)
    return worker.wait(worker.launch(plan, Fence(0), live)).records


def live_request(slot, request, decoder):
    handle = RequestHandle(slot, 1)
    return LiveRequest(request, handle, lambda _: None, IncrementalDetokenizer(decoder))


def test_image_prompt_in_mixed_speculative_chunks_then_mtp_rounds_matches_transformers(
    vision_case,
):
    bundle_path, expected, expanded, images, _ = vision_case
    bundle, engine = open_engine(
        ServeOptions(artifacts=str(bundle_path), device="cpu", max_context_tokens=2048)
    )
    worker = engine.worker
    greedy = SamplingParams(max_tokens=NUM_TOKENS, temperature=0)
    image_request = GenerationRequest("img", tuple(expanded), greedy, images=images)
    text_request = GenerationRequest("txt", (11, 400, 93, 1200, 64), greedy)
    live = {
        RequestHandle(IMAGE_SLOT, 1): live_request(IMAGE_SLOT, image_request, bundle),
        RequestHandle(TEXT_SLOT, 1): live_request(TEXT_SLOT, text_request, bundle),
    }
    run(
        worker,
        live,
        pick(engine, "prefill", token_capacity=64),
        [lane(TEXT_SLOT, LaneRole.PROMPT, 5)],
    )
    mixed = pick(engine, "mixed", prefill_capacity=64, proposal_depth=1)
    second = images.spans[1].start
    cuts = [0, 64, second, len(expanded)]
    assert cuts[2] - cuts[1] <= 64 and cuts[3] - cuts[2] <= 64
    tokens: list[int] = []
    for start, stop in itertools.pairwise(cuts):
        is_last = stop == len(expanded)
        records = run(
            worker,
            live,
            mixed,
            [
                lane(IMAGE_SLOT, LaneRole.PROMPT, stop - start, advance=int(is_last)),
                lane(TEXT_SLOT, LaneRole.DECODE, query=2, advance=2),
            ],
        )
        tokens += records[0].token_ids
    spec = pick(engine, "speculative", batch_capacity=1, proposal_depth=3)
    while len(tokens) < len(expected):
        (record,) = run(worker, live, spec, [lane(IMAGE_SLOT, LaneRole.DECODE, query=4, advance=4)])
        tokens += record.token_ids
    assert tokens[: len(expected)] == expected
