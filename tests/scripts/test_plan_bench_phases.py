"""`plan_bench --phases` wraps the fast selector's phases by name; a phase renamed or
removed in helios/fast must be renamed here too, or the benchmark breaks at start."""

from ignition.helios.fast import selector
from ignition.helios.fast.state_search import StateSearch
from scripts.scheduling_sim.plan_bench import PHASES, SEARCH_PHASES, phase_timers


def test_every_timed_phase_is_a_name_the_fast_selector_calls():
    missing = [name for name in PHASES if not callable(getattr(selector, name, None))]
    assert missing == []
    assert all(callable(getattr(StateSearch, name, None)) for name in SEARCH_PHASES)


def test_phase_timers_wrap_and_restore_the_selector():
    before = {name: getattr(selector, name) for name in PHASES}
    samples, unwrap = phase_timers()
    assert all(getattr(selector, name) is not before[name] for name in PHASES)
    unwrap()
    assert all(getattr(selector, name) is before[name] for name in PHASES)
    assert set(PHASES) <= set(samples)
