"""The capacity search's lowest load (issue 12): a capacity of 0.0 means the policy failed
the SLO at the search's first load, so the page reports that bound, and ``--lo`` lowers
it and is kept with the results."""

from __future__ import annotations

import json
from pathlib import Path

from ignition.simulate.search import Capacity
from scripts.scheduling_sim.capacity_study import (
    SEARCH_LO,
    TARGET_SLOS,
    Job,
    JobResult,
    _ratio,
    _shown,
    load_results,
    save_results,
)


def test_a_capacity_below_the_search_floor_reads_as_that_bound_not_as_zero():
    assert _shown(0.0, 0.25) == "< 0.25"
    assert _shown(0.261068, 0.25) == "0.261"


def test_a_helios_below_the_floor_has_a_ratio_bound_rather_than_0x():
    assert _ratio(0.0, 0.261, helios_lo=0.25) == "< 0.96x"
    assert _ratio(0.2, 0.25) == "0.80x"
    assert _ratio(0.2, 0.0) == "-"


RESULTS = Path(__file__).parents[2] / "docs/capacity/results.json"


def test_the_search_floor_of_a_results_file_survives_a_save_and_load(tmp_path: Path):
    half = load_results(RESULTS)[0].half
    job = Job(4, "helios", (2000, 2600), lo=0.125)
    result = JobResult(job, [Capacity("helios", TARGET_SLOS[0], 0.2, None)], {}, half, 1.0)
    save_results([result], tmp_path / "r.json")
    (loaded,) = load_results(tmp_path / "r.json")
    assert loaded.job.lo == 0.125


def test_a_results_file_written_before_lo_existed_was_searched_from_the_default_floor(
    tmp_path: Path,
):
    half = load_results(RESULTS)[0].half
    job = Job(4, "helios", (2000, 2600))
    save_results([JobResult(job, [], {}, half, 1.0)], tmp_path / "r.json")
    data = json.loads((tmp_path / "r.json").read_text())
    del data[0]["lo"]
    (tmp_path / "r.json").write_text(json.dumps(data))
    assert load_results(tmp_path / "r.json")[0].job.lo == SEARCH_LO
