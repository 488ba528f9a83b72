"""Issue 14: probe_core.py's bound never rules out a shape that holds a probe: a shape it
rules out against a score has no optimistic candidate above that score (the definition's
candidates, decide.policy.candidates_for over the optimistic decoder table), on random
histories aged and observed, tied values and exhausted outputs and contexts."""

from __future__ import annotations

import math
import random

import numpy as np
from helios_helpers import mixed, spec
from test_helios_lane_core import MAX_DEPTH, _decision, _views

from ignition.helios.config import SpeculationMode
from ignition.helios.decide.policy import PromptTable, Tables, candidates_for
from ignition.helios.decide.rounds import LaneTable
from ignition.helios.fast.probe_core import ProbeBound
from ignition.helios.state.acceptance import PopulationPrior, PrefixHistory
from ignition.helios.state.cost import CostModel

ADAPTIVE = SpeculationMode.ADAPTIVE


def _histories(rng: random.Random, n: int) -> list[PrefixHistory]:
    prior = PopulationPrior()
    out = []
    for _ in range(n):
        preseed = tuple(rng.choice([0.0, 0.3, 0.9, 1.0]) for _ in range(rng.randint(0, 5)))
        history = PrefixHistory(prior, preseed)
        for _ in range(rng.randint(0, 6)):
            history.age(rng.choice([0, 1, 3, 200]))
            if rng.random() < 0.6:
                history.observe(rng.randint(1, MAX_DEPTH), rng.choice([0.0, 1.0, 0.4]))
        out.append(history)
    return out


def test_a_shape_the_probe_bound_rules_out_has_no_optimistic_candidate_above_the_score():
    rng = random.Random(41)
    shapes = [spec(b, w, p) for b in (1, 4, 16) for w in (2, 3, 5) for p in (None, b + 1)]
    shapes += [mixed(b, 64, w) for b in (2, 8) for w in (1, 3)]
    max_batch = max(d.batch_capacity for d in shapes)
    checked, outcomes = 0, set()
    for _ in range(120):
        views, decision = _views(rng), _decision(rng)
        if not views:
            continue
        prompts = views[: rng.randint(0, 2)]
        histories = _histories(rng, len(views))
        ordinary = LaneTable(views, decision, MAX_DEPTH)
        survivals = [h.optimistic_survivals(MAX_DEPTH) for h in histories]
        optimistic = LaneTable(views, decision, MAX_DEPTH, survivals)
        tables = Tables(PromptTable(prompts, shapes), optimistic)
        outputs = np.array([h.optimistic_outputs(MAX_DEPTH, decision.alpha) for h in histories])
        caps = rng.sample(range(1, MAX_DEPTH + 2), rng.randint(0, 3))  # the rest when asked
        fast = ProbeBound(
            views, ordinary.fixed, outputs, prompts, decision, MAX_DEPTH, max_batch, caps
        )
        t_ms = rng.choice([1.0, 2.5, 9.0])
        costs = CostModel(10**12)
        for d in shapes:
            costs.seed(d, round(t_ms * 1e6))
        for d in shapes:
            score = rng.choice([-1.0, 0.0, 0.5, 2.0])
            found = fast.bound(d, t_ms, score)
            candidates = candidates_for(d, tables, costs, decision, 0, ADAPTIVE)
            best = max((c.score for c in candidates), default=-math.inf)
            if found is None:
                assert best <= score + 1e-9 * max(1.0, abs(score)), (d, t_ms, score, best)
            else:
                assert found > score and best <= found + 1e-9 * max(1.0, abs(found))
            checked += 1
            outcomes.add(found is None)
    assert checked > 2000 and outcomes == {True, False}
