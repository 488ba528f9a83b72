"""The ``no-refresh`` and ``no-learning`` what-ifs (simulate/harness.py): that exploration
ledger never earns credit, so no timing refresh or acceptance probe runs, while ordinary
frames still run and are credited."""

from __future__ import annotations

from ignition.simulate.harness import helios_simulation
from scripts.scheduling_sim.realworld import random_setup, random_workload


def _ledgers(policy: str):
    sim = helios_simulation(random_workload(8)[:40], random_setup(8), policy)
    sim.run()
    return sim.scheduler.books.refresh, sim.scheduler.books.learning


def test_unfunded_exploration_what_ifs_never_open_an_episode():
    refresh, learning = _ledgers("helios")
    assert refresh.numerator > 0 and learning.episodes > 0  # both earn; probes ran
    quiet_refresh, _ = _ledgers("helios+no-refresh")
    _, quiet_learning = _ledgers("helios+no-learning")
    for quiet in (quiet_refresh, quiet_learning):
        assert quiet.numerator == 0 and quiet.balance == 0 and quiet.episodes == 0
        assert quiet.ordinary_ns > 0  # ordinary frames ran and earned it nothing
