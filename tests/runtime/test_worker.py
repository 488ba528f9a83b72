"""Worker input packing, role validation and completion records (runtime phase tests)."""

from __future__ import annotations

import pytest
import torch

from ignition.compiler.graph import prepare_programs
from ignition.components.capacity import plan_catalog
from ignition.components.mode_selection import select_for_mode
from ignition.helios import (
    Fence,
    LaneRole,
    LaneWork,
    RequestHandle,
    ScheduledPlan,
    SelectionReason,
)
from ignition.kernels import use_backend
from ignition.model.config import ModelConfig
from ignition.model.state import ModelState
from ignition.model.weights import random_model
from ignition.recipes import LoadOptions, get_recipe
from ignition.runtime.executors.resources import SlotResources
from ignition.runtime.executors.results import completion_record
from ignition.runtime.executors.worker import ModelWorker, WorkerError
from ignition.runtime.requests.detokenize import IncrementalDetokenizer
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from ignition.runtime.requests.table import LiveRequest

PAGE = 64


class Chars:
    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(65 + i % 26) for i in ids)


@pytest.fixture(scope="module")
def setup():
    with use_backend("reference"):
        model = random_model(ModelConfig.tiny(), seed=1)
        catalog = select_for_mode(
            plan_catalog(
                get_recipe("qwen38"), LoadOptions(mixed_prefill=True, max_prefill_chunk=128)
            ),
            "off",
        )
        state = ModelState.allocate(model.config, 4, 4 * 8, PAGE, 8)
        programs, _ = prepare_programs(model, state, catalog.descriptors, torch.device("cpu"))
    return model, catalog, state, programs


def make_worker(setup) -> ModelWorker:
    _, _, state, programs = setup
    return ModelWorker(state, programs, SlotResources(state, 4 * 8), frozenset({2}))


def lane(slot: int, role: LaneRole, prompt: int = 0, query: int = 0, advance: int = 1):
    return LaneWork(
        RequestHandle(slot, 1),
        0,
        role,
        prompt,
        query,
        float(advance),
        float(advance),
        advance,
        prompt + query,
        1.0,
    )


def plan_for(catalog, name: str, lanes) -> ScheduledPlan:
    d = next(d for d in catalog.descriptors if d.name == name)
    return ScheduledPlan(d, tuple(lanes), 0, 0, -1, 1.0, 0.0, SelectionReason.DISCOVERY, True, 0, 0)


def live_for(slot: int, prompt: list[int]) -> LiveRequest:
    request = GenerationRequest(f"r{slot}", tuple(prompt), SamplingParams(temperature=0.0))
    return LiveRequest(
        request, RequestHandle(slot, 1), lambda c: None, IncrementalDetokenizer(Chars())
    )


def test_mixed_plan_packs_rows_by_prefix_sums_with_one_prompt_row(setup):
    _, catalog, _, _ = setup
    worker = make_worker(setup)
    live = {RequestHandle(s, 1): live_for(s, [10 + s] * 30) for s in range(3)}
    with use_backend("reference"):
        # Slots 1 and 2 become decoders first, then slot 0's prompt joins them.
        for s in (1, 2):
            prefill = plan_for(catalog, "prefill-b1-d0-w64-p64", [lane(s, LaneRole.PROMPT, 30)])
            worker.wait(worker.launch(prefill, Fence(s), live))
        plan = plan_for(
            catalog,
            "mixed-plain-b4-d0-w1-p4-c64",
            [
                lane(1, LaneRole.DECODE, query=1),
                lane(0, LaneRole.PROMPT, prompt=30),
                lane(2, LaneRole.DECODE, query=1),
            ],
        )
        launched = worker.launch(plan, Fence(3), live)
    packed = worker.programs[plan.descriptor.name][0].inputs.packed
    assert packed.query_lens.tolist() == [1, 30, 1, 0]
    assert packed.slot_ids.tolist() == [1, 0, 2, -1]
    assert packed.prefill_row.tolist() == [1]
    # The prompt sits at its row's packed offset (prefix sum 1); the decode rows' tokens came
    # from the device pending buffer, i.e. each slot's first sampled token.
    assert packed.token_ids[1:31].tolist() == [10] * 30
    result = worker.wait(launched)
    assert [r.num_prompt_tokens for r in result.records] == [0, 30, 0]
    assert [len(r.token_ids) for r in result.records] == [1, 1, 1]


def test_a_prompt_chunk_that_does_not_end_the_prompt_publishes_nothing(setup):
    _, catalog, _, _ = setup
    worker = make_worker(setup)
    live = {RequestHandle(0, 1): live_for(0, list(range(5, 105)))}
    plan = plan_for(catalog, "prefill-b1-d0-w64-p64", [lane(0, LaneRole.PROMPT, 64, advance=0)])
    with use_backend("reference"):
        result = worker.wait(worker.launch(plan, Fence(0), live))
    assert result.records[0].num_prompt_tokens == 64
    assert result.records[0].token_ids == ()


def test_rows_outside_the_program_roles_are_rejected(setup):
    _, catalog, _, _ = setup
    worker = make_worker(setup)
    live = {RequestHandle(s, 1): live_for(s, [7] * 10) for s in range(2)}
    two_prompts = plan_for(
        catalog,
        "mixed-plain-b2-d0-w1-p2-c64",
        [lane(0, LaneRole.PROMPT, 10), lane(1, LaneRole.PROMPT, 10)],
    )
    with pytest.raises(WorkerError, match="2 prompt rows"):
        worker.launch(two_prompts, Fence(0), live)
    prompt_in_decode = plan_for(catalog, "decode-b2-d0-w1-p2", [lane(0, LaneRole.PROMPT, 10)])
    with pytest.raises(WorkerError, match="prompt capacity 0"):
        worker.launch(prompt_in_decode, Fence(1), live)
    too_long = plan_for(catalog, "prefill-b1-d0-w64-p64", [lane(0, LaneRole.PROMPT, 100)])
    with pytest.raises(WorkerError, match="prompt chunk of 100 tokens"):
        worker.launch(too_long, Fence(2), live)


def test_eos_truncates_a_lane_and_marks_it_finished():
    overrun = set()
    record = completion_record(
        lane(0, LaneRole.DECODE, query=4, advance=4), [5, 2, 9], {2}, overrun
    )
    assert record.token_ids == (5, 2) and record.is_finished
    record = completion_record(
        lane(0, LaneRole.DECODE, query=4, advance=1), [5, 6, 9], {2}, overrun
    )
    assert record.token_ids == (5,) and not record.is_finished
