"""Timing refresh's stale alternative is found without evaluating every stale program.

``bounds.stale_alternative`` must return what ``refresh.choose_refresh`` picks from the
exhaustive candidates (``decide.selector.Exhaustive``): the oldest refresh key first, then
the best ranked, pruned candidates left out, the winner's own cost entry excluded, and
with ``refresh_could_win`` only alternatives that could beat the winner."""

from __future__ import annotations

import pytest
from exploration_helpers import MS, Runner
from helios_helpers import decode, floor_ms, mixed, prefill, request, scheduler, spec

from ignition.helios import PolicyConfig
from ignition.helios.decide.policy import active_descriptors, select
from ignition.helios.decide.refresh import choose_refresh
from ignition.helios.decide.selector import Exhaustive
from ignition.helios.fast.bounds import stale_alternative
from ignition.helios.fast.catalog_index import CatalogIndex
from ignition.helios.fast.tables import build_tables
from ignition.helios.state.cost import Freshness


def _exhaustive_and_lazy(s):
    evaluation = Exhaustive().evaluate(s.selection_state())
    every, decision, population = evaluation.inference, evaluation.decision, evaluation.population
    winner = select(every)
    if winner is None or winner.is_indeterminate:
        return None
    expected = choose_refresh(winner, every, s.costs, decision)
    index = CatalogIndex(s.descriptors)
    lazy = stale_alternative(
        active_descriptors(index, population),
        build_tables(index, population, decision, s._max_depth),
        s.costs,
        decision,
        s.now_ns,
        s.speculation,
        index,
        winner,
    )
    return expected, lazy


def _identity(c):
    return None if c is None else (c.descriptor, c.work_key, c.score)


@pytest.mark.parametrize("could_win", [False, True])
def test_the_stale_alternative_is_choose_refreshs_pick_from_every_candidate(could_win):
    programs = [
        prefill(64),
        prefill(256),
        *(decode(b) for b in (1, 2, 4, 8)),
        spec(2, 2),
        spec(4, 2),
        spec(4, 4),
        spec(8, 2),
        mixed(4, 64),
        mixed(8, 64),
    ]
    policy = PolicyConfig(estimate_ttl_ns=30 * MS, refresh_could_win=could_win)
    s = scheduler(programs, floor_ms, policy=policy)
    runner = Runner(s)
    runner.decoding(6, output=400)
    found = 0
    for step in range(60):
        if step % 15 == 0:
            s.admit(request(64 + 16 * step, 200))  # prompts keep prefill and mixed in play
        stale = [d for d in s.descriptors if s.costs.freshness(d, s.now_ns) is Freshness.STALE]
        if stale:
            if could_win:  # every other stale program once ran fast: only those could win
                for d in stale[::2]:
                    s.costs.entry(d).samples.appendleft(1)  # the median estimate stays
            got = _exhaustive_and_lazy(s)
            if got is not None:
                expected, (decided, alternative) = got
                assert decided
                assert _identity(alternative) == _identity(expected)
                found += expected is not None
        if runner.step() is None:
            runner.wait(MS)
    assert found > 0  # the check met real stale alternatives, not only their absence
