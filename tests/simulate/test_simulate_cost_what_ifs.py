"""The cost-model what-ifs of issue 39's c = 64 study (``simulate/cost_what_ifs.py``):
``helios+row-oracle`` prices programs at the rows they could carry now, ``helios+ple-stall``
reports the decode tokens' PLE gather as readiness stall. Off by default."""

from __future__ import annotations

from functools import partial

import pytest

from ignition.components.program_kinds import GraphKind
from ignition.simulate.cost_what_ifs import estimate_at_ready_rows
from ignition.simulate.devices import device_from_spec
from ignition.simulate.harness import Setup, helios_simulation
from ignition.simulate.sim_durations import duration_ms, nominal_ns
from scripts.scheduling_sim import two_class

PROFILE = "qwen38-flash-next-4xh100"  # PLE rows on the host: a frame's cost follows its rows


def _sim(name: str, requests: int = 6):
    setup = Setup(slots=8, speculative_token_capacity=16, device=device_from_spec(PROFILE))
    sim = helios_simulation(two_class.workload(requests, prompt=64, output=24), setup, name)
    return sim


def test_the_what_ifs_are_off_by_default_and_named_variants_turn_them_on():
    plain = _sim("helios")
    assert not plain.row_oracle and not plain.ple_stall
    assert _sim("helios+row-oracle").row_oracle
    assert _sim("helios+ple-stall").ple_stall


def test_row_oracle_prices_a_program_at_the_rows_it_could_carry():
    """Six decoders ready: the B = 8 generation program's estimate is its duration at six
    rows, below the preseed at its eight nominal rows (fails if the estimate is left
    at the preseed or priced at capacity)."""
    sim = _sim("helios+row-oracle")
    sim.run()  # every request admitted and served; now set them as six ready decoders
    for s in list(sim.by_handle.values())[:6]:
        s.remaining_output = 1
        sim.unfinished[s.handle] = s
    d = next(
        d
        for d in sim.scheduler.programs().inference
        if d.kind is GraphKind.SPECULATIVE and d.batch_capacity == 8 and d.token_capacity == 1
    )
    nominal = nominal_ns(sim.scenario, d)
    sim.scheduler.costs.entry(d).estimate_ns = nominal
    estimate_at_ready_rows(
        sim.scheduler, sim._ready_contexts(), partial(duration_ms, sim.scenario)
    )
    got = sim.scheduler.costs.estimate_ns(d)
    contexts = sim._ready_contexts()
    per_row = sum(contexts) // len(contexts)
    want = duration_ms(
        sim.scenario, d, 6, 6, per_row * 6, draft_rows=6, row_contexts=(per_row,) * 6
    )
    assert len(contexts) == 6
    assert got == pytest.approx(want * 1e6, rel=1e-6)
    assert got < nominal


def _stalls(name: str) -> list[tuple[int, int, int]]:
    """(readiness stall ns, device ns, decode tokens) of every completion the run reports."""
    sim = _sim(name)
    seen = []
    complete = sim.scheduler.complete

    def spy(fence, report):
        tokens = sum(len(r.token_ids) for r in report.records if r.num_prompt_tokens == 0)
        seen.append((report.timing.readiness_stall_ns, report.timing.device_ns, tokens))
        return complete(fence, report)

    sim.scheduler.complete = spy
    sim.run()
    return seen


def test_ple_stall_reports_the_decode_tokens_gather_as_readiness_stall():
    """Every frame serving decoders reports its host gather (313 us a verified token) as
    stall, below its device interval, so the scheduler leaves it out of the cost sample
    (fails without the report: the default reports none)."""
    per_token = device_from_spec(PROFILE).ple_host_us_per_token * 1e3
    stalled = _stalls("helios+ple-stall")
    decoding = [(stall, device) for stall, device, tokens in stalled if tokens]
    assert decoding and all(per_token <= stall < device for stall, device in decoding)
    assert all(stall == 0 for stall, _, _ in _stalls("helios"))
