"""Issue 14: probe_core.py's arrays rule out exactly the shapes the frozen reference
``_Bound`` rules out for the acceptance-probe search, on random histories aged and
observed, tied values and exhausted outputs and contexts."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
from helios_helpers import mixed, spec
from test_helios_lane_core import MAX_DEPTH, _decision, _views

from ignition.helios.decide.learning import _Bound as ReferenceBound
from ignition.helios.decide.rounds import LaneTable as ReferenceLaneTable
from ignition.helios.decide.speculation import PopulationPrior, PrefixHistory
from ignition.helios.fast.probe_core import ProbeBound


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


def test_probe_bounds_rule_out_exactly_the_shapes_the_python_bound_rules_out():
    rng = random.Random(41)
    shapes = [spec(b, w, p) for b in (1, 4, 16) for w in (2, 3, 5) for p in (None, b + 1)]
    shapes += [mixed(b, 64, w) for b in (2, 8) for w in (1, 3)]
    checked, outcomes = 0, set()
    for _ in range(200):
        views, decision = _views(rng), _decision(rng)
        if not views:
            continue
        prompts = views[: rng.randint(0, 2)]
        histories = {v.handle: h for v, h in zip(views, _histories(rng, len(views)), strict=True)}
        ordinary = ReferenceLaneTable(views, decision, MAX_DEPTH)
        max_batch = max(d.batch_capacity for d in shapes)
        population = SimpleNamespace(decoders=views, prompts=prompts)
        ref = ReferenceBound(
            population, ordinary, histories.__getitem__, decision, MAX_DEPTH, max_batch
        )
        outputs = np.array(
            [h.optimistic_outputs(MAX_DEPTH, decision.alpha) for h in histories.values()]
        )
        caps = rng.sample(range(1, MAX_DEPTH + 2), rng.randint(0, 3))  # the rest when asked
        fast = ProbeBound(
            views, ordinary.fixed, outputs, prompts, decision, MAX_DEPTH, max_batch, caps
        )
        for d in shapes:
            t_ms, score = rng.choice([1.0, 2.5, 9.0]), rng.choice([-1.0, 0.0, 0.5, 2.0])
            found = fast.bound(d, t_ms, score)
            assert (found is not None) == ref.can_beat(d, t_ms, score), (d, t_ms, score)
            if found is not None:
                assert found > score
            checked += 1
            outcomes.add(found is None)
    assert checked > 4000 and outcomes == {True, False}
