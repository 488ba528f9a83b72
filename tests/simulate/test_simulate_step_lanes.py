"""The simulator reads the recipe's prompt lanes for serving builds (issue 39): ``helios``
at 32 slots runs the qwen38 recipe's step lanes {512: 4, 1024: 4, 2048: 2, 4096: 2} with no
variant (the catalog ``helios+rec-lanes`` measured), ``helios+seed-lanes`` is the catalog
before them and ``helios+l1`` still loads the one-lane programs only."""

from __future__ import annotations

from ignition.simulate.harness import RECOMMENDED_LANES, helios_catalog, helios_simulation
from ignition.simulate.workloads import SimRequest
from scripts.scheduling_sim.realworld import setup_for


def lanes(catalog) -> set[tuple[int, int]]:
    return {(d.prompt_capacity, d.prompt_lanes) for d in catalog.descriptors if d.prompt_lanes > 1}


def names(catalog) -> set[str]:
    return {d.name for d in catalog.descriptors}


def test_helios_at_32_slots_runs_the_recipes_step_lanes():
    plain = helios_catalog("qwen38", 32, 128)
    assert lanes(plain) >= set(RECOMMENDED_LANES)
    assert names(plain) == names(helios_catalog("qwen38", 32, 128, lane_option=RECOMMENDED_LANES))
    assert not lanes(helios_catalog("qwen38", 32, 128, seed_lanes=True))
    assert not lanes(helios_catalog("qwen38", 32, 128, lanes=1))
    assert not lanes(helios_catalog("qwen38", 8, 32))


def test_a_what_if_lane_table_replaces_the_step_lanes():
    four = helios_catalog("qwen38", 32, 128, lanes=4, lanes_upto=256)
    assert {b for b, _ in lanes(four)} <= {64, 128, 256}


def test_the_seed_lanes_variant_shapes_the_simulated_catalog():
    setup = setup_for("qwen38-flash-next-h200", 32, 128)
    sim = helios_simulation([SimRequest(0.0, 100, 4)], setup, "helios+seed-lanes")
    assert not lanes(sim.scenario.catalog)
    sim = helios_simulation([SimRequest(0.0, 100, 4)], setup, "helios")
    assert lanes(sim.scenario.catalog) >= set(RECOMMENDED_LANES)
