"""Issue 12: the instrument behind the capacity causes. Every execution records the
prompt tokens it consumed, the decoders it served, their widest target extent and the
resident decoders it left waiting, for Helios and the baselines alike; the quick
capacity search is the full one at a coarser grid."""

from __future__ import annotations

import pytest

from ignition.simulate.baselines import make_baseline
from ignition.simulate.devices import H200Roofline
from ignition.simulate.engine import run_baseline
from ignition.simulate.harness import Setup, run_helios
from ignition.simulate.search import SLO, Searcher, SearchError
from ignition.simulate.workloads import AcceptanceModel, poisson, with_acceptance
from scripts.scheduling_sim.capacity_study import QUICK
from scripts.scheduling_sim.frame_mix import frame_class, gap_causes


def _requests():
    return with_acceptance(
        poisson(20.0, 16, prompt_tokens=(300, 900), output_tokens=(8, 30), seed=5),
        AcceptanceModel((0.8, 0.7, 0.6)),
    )


def test_baseline_frames_record_prompt_tokens_decoders_and_width():
    run = run_baseline(make_baseline("vllm-k2"), _requests(), H200Roofline(), slots=4)
    mixed = [e for e in run.executions if e.kind == "mixed"]
    assert mixed and all(e.prompt_tokens > 0 and e.decoders > 0 for e in mixed)
    assert all(e.width == 3 for e in run.executions if e.decoders)
    assert all(e.tokens == e.prompt_tokens + 3 * e.decoders for e in run.executions)
    # decode first: a decode-first step never leaves a resident decoder out
    assert all(e.idle_decoders == 0 for e in run.executions)


def test_helios_frames_record_what_each_plan_served():
    run = run_helios(_requests(), Setup(slots=4, speculative_token_capacity=6))
    assert run.finished == 16
    assert sum(e.prompt_tokens for e in run.executions) == sum(r.prompt_tokens for r in _requests())
    for e in run.executions:
        assert e.rows >= e.decoders + (1 if e.prompt_tokens and e.kind != "prefill" else 0)
        assert (e.width > 0) == (e.decoders > 0)
        assert frame_class(e).startswith(
            "prefill" if e.decoders == 0 else ("mixed" if e.prompt_tokens else "gen")
        )


def test_gap_causes_count_every_gap_above_the_bound():
    run = run_baseline(make_baseline("vllm"), _requests(), H200Roofline(), slots=4)
    gaps = [
        b - a
        for r in run.requests
        for (a, _), (b, _) in zip(r.deliveries, r.deliveries[1:], strict=False)
    ]
    bound = sorted(gaps)[len(gaps) // 2]
    header = gap_causes(run, bound)[0]
    assert f": {sum(1 for g in gaps if g > bound)} of {len(gaps)} " in header


def test_the_quick_search_is_coarser_but_reports_its_resolution():
    assert QUICK.percent == pytest.approx(100 * (2 ** (1 / 16) - 1))
    requests = _requests()
    searcher = Searcher("vllm", lambda rate: requests, Setup(slots=4), guard_ms=5000.0)
    with pytest.raises(SearchError, match="grid factor 1"):
        searcher.capacity(SLO(None, 5000.0), factor=1.0)


def test_load_time_selection_what_ifs_keep_only_the_programs_they_name():
    from ignition.components.program_kinds import GraphKind
    from ignition.simulate.harness import helios_catalog

    full = helios_catalog("qwen38", 32, 128, full_batch=True, max_prompt=2048)
    for d in full.descriptors:
        if d.kind is GraphKind.PREFILL:
            assert d.token_capacity <= 2048
        else:
            assert d.batch_capacity >= 32 and d.prefill_capacity <= 2048
    wide = helios_catalog("qwen38", 32, 192)
    assert any(d.batch_capacity == 32 and d.token_capacity == 6 for d in wide.descriptors)


def test_the_one_frame_what_if_plans_only_when_the_device_is_idle(monkeypatch):
    import ignition.helios.scheduler as scheduler_module

    depths = []
    real = scheduler_module.Scheduler.commit

    def commit(self, plan, fence):
        depths.append(len(self.queue.frames))
        return real(self, plan, fence)

    monkeypatch.setattr(scheduler_module.Scheduler, "commit", commit)
    requests = _requests()
    run_helios(requests, Setup(slots=4, speculative_token_capacity=6), name="helios+one-frame")
    assert depths and max(depths) == 0
    depths.clear()
    run_helios(requests, Setup(slots=4, speculative_token_capacity=6))
    assert max(depths) == 1
