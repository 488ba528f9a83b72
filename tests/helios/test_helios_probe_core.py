"""Issue 14: probe_core.py's arrays give the acceptance-probe search the same optimistic
survivals, outputs and shape bounds as the Python loops they replace
(``PrefixHistory.optimistic_*`` and the frozen reference ``_Bound``), float for float,
on random histories aged and observed, tied values and exhausted outputs."""

from __future__ import annotations

import random
from types import SimpleNamespace

from helios_helpers import mixed, spec
from reference_selector.learning import _Bound as ReferenceBound
from reference_selector.rounds import LaneTable as ReferenceLaneTable
from test_helios_lane_core import MAX_DEPTH, _decision, _views

from ignition.helios.probe_core import ProbeBound, optimistic_arrays
from ignition.helios.speculation import PopulationPrior, PrefixHistory


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


def test_array_optimistic_survivals_and_outputs_equal_each_historys_own():
    rng = random.Random(14)
    for _ in range(300):
        histories = _histories(rng, rng.randint(1, 20))
        alpha = rng.choice([1.0, 0.5, 2.0])
        depth = rng.randint(1, MAX_DEPTH)
        survivals, outputs = optimistic_arrays(histories, depth, alpha)
        for history, s, o in zip(histories, survivals.tolist(), outputs.tolist(), strict=True):
            assert tuple(s) == history.optimistic_survivals(depth)
            assert tuple(o) == history.optimistic_outputs(depth, alpha)


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
        _, outputs = optimistic_arrays(list(histories.values()), MAX_DEPTH, decision.alpha)
        fast = ProbeBound(views, ordinary.fixed, outputs, prompts, decision, MAX_DEPTH, max_batch)
        for d in shapes:
            t_ms, score = rng.choice([1.0, 2.5, 9.0]), rng.choice([-1.0, 0.0, 0.5, 2.0])
            found = fast.bound(d, t_ms, score)
            assert (found is not None) == ref.can_beat(d, t_ms, score), (d, t_ms, score)
            if found is not None:
                assert found > score
            checked += 1
            outcomes.add(found is None)
    assert checked > 4000 and outcomes == {True, False}
