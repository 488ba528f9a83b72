"""Metrics and the SLO capacity search (issue 12 item 5)."""

from __future__ import annotations

import math

import pytest

from ignition.simulate.devices import Formula, FormulaDevice
from ignition.simulate.harness import Setup, run_helios
from ignition.simulate.metrics import measure, percentile
from ignition.simulate.results import ExecutionRecord, RequestRecord, RunResult
from ignition.simulate.search import SLO, Searcher, SearchError, parse_slos
from ignition.simulate.workloads import AcceptanceModel, poisson, with_acceptance


def one_run() -> RunResult:
    a = RequestRecord(0, 0.0, 100, 4, deliveries=[(50.0, 1), (60.0, 2), (90.0, 1)])
    a.first_output_ms, a.finish_ms = 50.0, 90.0
    b = RequestRecord(1, 10.0, 100, 1, deliveries=[(30.0, 1)])
    b.first_output_ms, b.finish_ms = 30.0, 30.0
    executions = [
        ExecutionRecord(0.0, 50.0, "prefill", "p"),
        ExecutionRecord(50.0, 60.0, "speculative", "s", execution_class="refresh"),
        ExecutionRecord(60.0, 90.0, "decode", "d"),
    ]
    return RunResult("x", [a, b], executions, 90.0)


def test_ttft_is_first_visible_output_minus_arrival_and_tbt_the_gaps_between_deliveries():
    m = measure(one_run())
    assert (m.ttft_ms.p50, m.ttft_ms.p99) == (20.0, 50.0)
    assert (m.tbt_ms.p50, m.tbt_ms.p99) == (10.0, 30.0)
    assert m.tpot_ms.p50 == pytest.approx(40.0 / 3)
    assert m.output_tokens_per_s == pytest.approx(5 / 0.09)


def test_device_time_is_reported_per_execution_class_and_per_graph_kind():
    m = measure(one_run())
    assert m.device_ms_by_class == {"ordinary": 80.0, "refresh": 10.0}
    assert m.device_ms_by_kind == {"decode": 30.0, "prefill": 50.0, "speculative": 10.0}


def test_a_request_without_output_is_infinitely_late():
    run = one_run()
    run.requests.append(RequestRecord(2, 0.0, 10, 10))
    assert math.isinf(measure(run).ttft_ms.p99)


def test_percentiles_are_nearest_rank():
    assert percentile(list(range(1, 101)), 0.99) == 99
    assert percentile([5.0], 0.5) == 5.0


def test_slo_pairs_parse_and_bad_ones_name_the_value():
    assert parse_slos("60:2,-:10") == [SLO(60.0, 2000.0), SLO(None, 10000.0)]
    with pytest.raises(SearchError, match="--slo 'fast'"):
        parse_slos("fast")


def _capacity_setup():
    device = FormulaDevice(
        formulas={
            kind: Formula(base_ms=5.0, per_row_ms=0.5, per_token_ms=0.02)
            for kind in ("prefill", "decode", "speculative", "mixed")
        }
    )
    reqs = poisson(2.0, 80, prompt_tokens=(256, 1024), output_tokens=(16, 64), seed=4)
    base = with_acceptance(reqs, AcceptanceModel((0.8, 0.6)))

    def workload(rate: float):
        from dataclasses import replace

        return [replace(r, arrival_ms=r.arrival_ms / rate) for r in base]

    return Setup(slots=8, device=device), workload


def test_capacity_is_the_highest_searched_load_meeting_the_slo():
    setup, workload = _capacity_setup()
    searcher = Searcher("vllm", workload, setup, guard_ms=2000.0)
    slo = SLO(None, 2000.0)
    found = searcher.capacity(slo, lo=0.5, hi=64.0)
    assert found.rate > 0.5 and slo.met_by(found.metrics)
    higher = [r for r in searcher.cache if r > found.rate]
    assert higher and not any(slo.met_by(searcher.cache[r]) for r in higher)


def test_a_tighter_tbt_bound_never_gives_more_capacity():
    setup, workload = _capacity_setup()
    searcher = Searcher("vllm-k2", workload, setup, guard_ms=2000.0)
    loose = searcher.capacity(SLO(None, 2000.0), lo=0.5, hi=64.0)
    tight = searcher.capacity(SLO(20.0, 2000.0), lo=0.5, hi=64.0)
    assert tight.rate <= loose.rate


def test_helios_runs_on_the_same_device_and_records_each_frames_execution_class():
    """Unmeasured programs are discovered first: the records carry the committed plans'
    classes, not one assumed class."""
    setup, workload = _capacity_setup()
    unmeasured = Setup(
        slots=4, speculative_token_capacity=6, device=setup.device, preseed_costs=False
    )
    run = run_helios(workload(1.0)[:12], unmeasured)
    assert run.finished == 12
    assert run.executions[0].execution_class == "discovery"
    assert {"discovery", "ordinary"} <= set(measure(run).device_ms_by_class)
