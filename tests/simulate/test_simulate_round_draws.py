"""A speculative round's draws are the simulation's random stream, value for value.

``draw_round`` draws eagerly and computes lazily (``acceptance.Round``), and draws its
confidence noise without a call per draw (``gauss_draws``): neither may change a value
or the generator's state, or every simulated run would change with it
(``scripts/scheduling_sim/decision_digest.py`` guards whole runs)."""

from __future__ import annotations

import math
import random

from ignition.simulate.acceptance import TASKS, draw_round, gauss_draws


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def _eager_round(conditional, round_sigma, noise, rng):
    """The round as computed before it was lazy: every sigmoid at once."""
    shock = rng.gauss(0.0, round_sigma) if round_sigma else 0.0
    q = tuple(_sigmoid(_logit(p) + shock) for p in conditional)
    if noise == 0:
        return q, q
    return q, tuple(_sigmoid(_logit(p) + rng.gauss(0.0, noise)) for p in q)


def test_gauss_draws_are_random_gauss_value_for_value_and_leave_the_same_state():
    ours, theirs = random.Random(5), random.Random(5)
    for n in (0, 1, 2, 3, 8, 7, 1, 0, 5):
        assert ours.gauss(0.0, 1.0) == theirs.gauss(0.0, 1.0)
        assert gauss_draws(ours, 0.7, n) == tuple(theirs.gauss(0.0, 0.7) for _ in range(n))
        assert ours.getstate() == theirs.getstate()


def test_a_drawn_round_holds_the_eager_values_and_verifies_drafts_with_the_same_draws():
    ours, theirs = random.Random(11), random.Random(11)
    conditional = TASKS["chat"].draw(random.Random(2))
    for noise in (0.0, 0.7, 2.0):
        for drafts in (0, 1, 3, 8):
            r = draw_round(conditional, 0.6, noise, ours)
            q, signal = _eager_round(conditional, 0.6, noise, theirs)
            expected = 0
            for p in q[:drafts]:
                if theirs.random() >= p:
                    break
                expected += 1
            assert r.accepted(drafts, ours) == expected  # before conditional is read
            assert r.conditional == q and r.signal == signal
            assert ours.getstate() == theirs.getstate()
