"""The diagnostic direct scheduler: prompts first, decode-round selection, 7/8 costs."""

from __future__ import annotations

import pytest

from ignition.components.capacity import plan_catalog
from ignition.components.mode_selection import select_for_mode
from ignition.direct.scheduler import STALE_AFTER_NS, DirectScheduler, MovingAverageCost
from ignition.helios import (
    CompletionRecord,
    CompletionReport,
    ExecutionTiming,
    Fence,
    LaneRole,
    RequestSpec,
    Resources,
    SchedulerError,
)
from ignition.recipes import LoadOptions, get_recipe
from ignition.runtime.loop.engine import Engine
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from tests.runtime.scripted import Letters, ScriptedWorker, expected_tokens


def scheduler(speculation: str = "off", slots: int = 4) -> DirectScheduler:
    catalog = plan_catalog(get_recipe("qwen38"), LoadOptions(speculation=speculation))
    return DirectScheduler(select_for_mode(catalog, speculation), Resources(slots))


def run_frame(s: DirectScheduler, fence: int, duration_ns: int, token: int = 7):
    plan = s.plan()
    s.commit(plan, Fence(fence))
    records = [
        CompletionRecord(
            lane.handle, lane.num_prompt_tokens, (token,) if lane.max_advance_tokens else ()
        )
        for lane in plan.lanes
    ]
    s.advance_to(s.now_ns + duration_ns)
    return plan, s.complete(
        Fence(fence), CompletionReport(records, ExecutionTiming(duration_ns, duration_ns))
    )


def test_cost_is_a_seven_eighths_moving_average():
    cost = MovingAverageCost()
    cost.observe(800, now_ns=0)
    assert cost.value(0) == 800
    cost.observe(1600, now_ns=1)
    assert cost.value(1) == pytest.approx(800 * 7 / 8 + 1600 / 8)


def test_cost_reverts_to_unmeasured_after_thirty_seconds():
    cost = MovingAverageCost()
    cost.observe(800, now_ns=0)
    assert cost.value(STALE_AFTER_NS) == 800
    assert cost.value(STALE_AFTER_NS + 1) == 0
    cost.observe(1000, now_ns=STALE_AFTER_NS + 1)
    assert cost.value(STALE_AFTER_NS + 1) == 1000  # first sample after expiry sets it


def test_prompts_go_first_in_the_smallest_bucket_that_holds_them():
    s = scheduler()
    s.admit(RequestSpec(num_prompt_tokens=100, max_output_tokens=4))
    plan = s.plan()
    assert plan.descriptor.kind.value == "prefill"
    assert plan.descriptor.token_capacity == 128
    assert plan.lanes[0].role is LaneRole.PROMPT and plan.lanes[0].num_prompt_tokens == 100


def test_long_prompts_are_chunked_at_the_largest_bucket():
    s = scheduler()
    s.admit(RequestSpec(num_prompt_tokens=5000, max_output_tokens=4))
    plan, tokens = run_frame(s, 0, 1_000_000)
    assert plan.lanes[0].num_prompt_tokens == 4096 and tokens == []
    plan, tokens = run_frame(s, 1, 1_000_000)
    assert plan.lanes[0].num_prompt_tokens == 904 and len(tokens) == 1


def test_a_chunk_is_cut_before_an_image_span_it_would_split():
    """Issue 13: atomic image spans stay within one prefill chunk under debug-serve too."""
    s = scheduler()
    s.admit(RequestSpec(num_prompt_tokens=5000, max_output_tokens=4, image_spans=((4090, 4100),)))
    plan, _ = run_frame(s, 0, 1_000_000)
    assert plan.lanes[0].num_prompt_tokens == 4090
    plan, _ = run_frame(s, 1, 1_000_000)
    assert plan.lanes[0].num_prompt_tokens == 910


def test_unmeasured_decode_programs_are_explored_then_the_best_rate_wins():
    s = scheduler()
    for _ in range(3):
        s.admit(RequestSpec(num_prompt_tokens=8, max_output_tokens=100))
    fence = 0
    for _ in range(3):
        run_frame(s, fence, 1_000_000)
        fence += 1
    durations = {1: 1_000_000, 2: 1_100_000, 4: 1_200_000}
    seen = []
    for _ in range(3):
        plan = s.plan()
        seen.append(plan.descriptor.batch_capacity)
        run_frame(s, fence, durations[plan.descriptor.batch_capacity])
        fence += 1
    assert seen == [4, 2, 1]  # unmeasured first, the largest useful batch first
    plan = s.plan()
    assert plan.descriptor.batch_capacity == 4  # 3 lanes / 1.2 ms beats 2 / 1.1 and 1 / 1.0
    assert len(plan.lanes) == 3


def test_speculative_catalogs_decode_with_width_one_rounds():
    s = scheduler(speculation="adaptive")
    assert {d.proposal_depth for d in s.rounds} == {0}
    assert {d.token_capacity for d in s.rounds} == {1}


def test_stale_plans_and_foreign_handles_are_rejected():
    s = scheduler()
    handle = s.admit(RequestSpec(num_prompt_tokens=8, max_output_tokens=2))
    plan = s.plan()
    s.cancel(handle)
    with pytest.raises(SchedulerError, match="does not own"):
        s.commit(plan, Fence(0))


def test_engine_serves_requests_through_the_direct_scheduler():
    engine = Engine(scheduler(slots=2), ScriptedWorker(), Letters(), max_context_tokens=4096)
    chunks = {name: [] for name in "abc"}
    for name, prompt in zip("abc", ([1, 2, 3], [4] * 300, [9, 8]), strict=True):
        engine.submit(
            GenerationRequest(name, tuple(prompt), SamplingParams(max_tokens=5, ignore_eos=True)),
            chunks[name].append,
        )
    engine.run_until_idle()
    for name, prompt in zip("abc", ([1, 2, 3], [4] * 300, [9, 8]), strict=True):
        text = "".join(c.text for c in chunks[name])
        assert text == Letters().decode(expected_tokens(prompt, 5, stop_at_eos=False))
        assert chunks[name][-1].finish_reason == "length"
