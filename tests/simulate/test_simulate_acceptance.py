"""Acceptance as it varies: tasks tied to published figures, per-request and per-round
spread, and the drafter's confidence signal (issue 29 item 2)."""

from __future__ import annotations

import random

import pytest

from ignition.simulate.acceptance import (
    CONFIDENCE,
    TASKS,
    AcceptanceError,
    accept_length,
    confidence_noise,
    draw_round,
    parse_mix,
)
from ignition.simulate.workloads import SimRequest, with_tasks


def test_random_tokens_accept_the_recipes_36_5_percent_of_three_drafts():
    assert (accept_length(TASKS["random"].conditional(), 3) - 1) / 3 == pytest.approx(
        0.365, abs=0.005
    )


def test_chat_acceptance_falls_from_76_to_24_percent_over_eight_positions():
    c = TASKS["chat"].conditional(8)
    assert c[0] == pytest.approx(0.76) and c[7] == pytest.approx(0.24, abs=0.01)


def test_code_and_math_reach_the_published_accept_lengths():
    assert accept_length(TASKS["code"].conditional(), 4) == pytest.approx(4.0, abs=0.2)
    assert accept_length(TASKS["math"].conditional(), 7) == pytest.approx(5.11, abs=0.1)


def test_tasks_order_as_published_random_below_chat_below_code_and_math():
    lengths = {n: accept_length(t.conditional(), 4) for n, t in TASKS.items()}
    assert lengths["random"] < lengths["chat"] < lengths["code"] <= lengths["math"]


def test_requests_of_one_task_differ_in_level():
    rng = random.Random(0)
    firsts = {round(TASKS["chat"].draw(rng)[0], 3) for _ in range(20)}
    assert len(firsts) > 10


def test_a_mix_assigns_tasks_in_proportion_and_draws_each_requests_acceptance():
    requests = [SimRequest(float(i), 10, 10) for i in range(2000)]
    out = with_tasks(requests, parse_mix("chat:3,code:1"), seed=1)
    share = sum(r.task == "code" for r in out) / len(out)
    assert share == pytest.approx(0.25, abs=0.03)
    assert all(r.acceptance and r.round_sigma == TASKS[r.task].round_sigma for r in out)


def test_an_unknown_task_or_confidence_knob_is_one_line_naming_it():
    with pytest.raises(AcceptanceError, match="unknown task 'poetry'"):
        parse_mix("chat:1,poetry:1")
    with pytest.raises(AcceptanceError, match="confidence 'oracle'"):
        confidence_noise("oracle")


def _correlation(knob: str) -> float:
    rng = random.Random(3)
    pairs = []
    for _ in range(3000):
        r = draw_round((0.7,), 1.0, CONFIDENCE[knob], rng)
        pairs.append((r.signal[0], float(r.accepted(1, rng))))
    n = len(pairs)
    mx = sum(a for a, _ in pairs) / n
    my = sum(b for _, b in pairs) / n
    cov = sum((a - mx) * (b - my) for a, b in pairs)
    vx = sum((a - mx) ** 2 for a, _ in pairs)
    vy = sum((b - my) ** 2 for _, b in pairs)
    return cov / (vx * vy) ** 0.5


def test_a_perfect_drafter_reports_the_rounds_true_acceptance():
    r = draw_round((0.8, 0.6), 0.5, CONFIDENCE["perfect"], random.Random(0))
    assert r.signal == r.conditional


def test_confidence_predicts_acceptance_less_as_the_calibration_weakens():
    perfect, eagle2, weak = (_correlation(k) for k in ("perfect", "eagle2", "weak"))
    assert perfect > eagle2 > weak > 0


def test_helios_device_allocation_ranks_rows_by_the_drafters_confidence_not_the_truth():
    from collections import namedtuple
    from types import SimpleNamespace

    from ignition.simulate.acceptance import Round
    from ignition.simulate.sim_rounds import device_rows

    handle = namedtuple("handle", "slot")
    lanes = [SimpleNamespace(handle=handle(s), query_length=4) for s in range(2)]
    plan = SimpleNamespace(lanes=lanes, descriptor=SimpleNamespace(packed_capacity=5))
    # lane 0 will in truth accept everything but its drafter is unsure; lane 1 the reverse
    rounds = {
        lanes[0].handle: Round((1.0, 1.0, 1.0), (0.2, 0.2, 0.2)),
        lanes[1].handle: Round((0.0, 0.0, 0.0), (0.9, 0.9, 0.9)),
    }
    assert device_rows(plan, rounds) == [1, 4]  # type: ignore[arg-type]
