"""A candidate the TBT target rejects scores minus infinity (decide/chunk_target.py); it
must rank below every finite score, not tie with it: a tie fell to the tie-breaks
(shorter duration first), so a rejected candidate could outrank the best one and the
winner depended on the candidates' order."""

from __future__ import annotations

from itertools import permutations

from helios_helpers import decode, prefill

from ignition.helios.decide.policy import select
from ignition.helios.decide.utility import Candidate, compare
from ignition.helios.state.cost import Freshness


def _candidate(score: float, duration_ns: int, d) -> Candidate:
    return Candidate(
        d, duration_ns, Freshness.FRESH, score, 1, (score,), lambda: ([], 0), score=score
    )


def test_a_rejected_candidate_ranks_below_every_finite_score():
    rejected = _candidate(float("-inf"), 1, prefill(64))  # the shortest
    best = _candidate(2.0, 30, decode(4))
    other = _candidate(1.0, 20, decode(4))
    assert compare(best, rejected) < 0 and compare(rejected, best) > 0
    assert compare(rejected, _candidate(float("-inf"), 5, prefill(64))) < 0  # ties: shorter
    for order in permutations([rejected, best, other]):
        assert select(order) is best
