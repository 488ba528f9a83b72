"""Issue 23 item 5: ``ignition simulate --device h200+ple:RESIDENCY`` charges each execution
the PLE delivery it waits for, so residency choices appear in the simulated latencies."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ignition.cli import main
from ignition.components.program_kinds import GraphKind
from ignition.simulate.devices import DeviceError, Execution, H200Roofline
from ignition.simulate.ple_charge import PleCharge, PleChargedDevice, device_with_ple
from tests.simulate.test_simulate_command import SMALL, TRACE

PREFILL = Execution(GraphKind.PREFILL, 512, 1, 512, 1, 0)
ROUND = Execution(GraphKind.SPECULATIVE, 64, 16, 64, 16, 4096, draft_steps=3)


def charged(residency: str, **kwargs) -> PleChargedDevice:
    return PleChargedDevice(H200Roofline(), PleCharge(residency, **kwargs))


def test_device_residency_charges_nothing_beyond_the_device_model():
    assert charged("device").duration_ms(ROUND) == H200Roofline().duration_ms(ROUND)


def test_off_device_residencies_cost_a_round_more_and_a_cold_disk_most():
    device, host = charged("device").duration_ms(ROUND), charged("host").duration_ms(ROUND)
    warm = charged("disk", cache_hit_rate=0.9).duration_ms(ROUND)
    cold = charged("disk").duration_ms(ROUND)
    assert device < host < warm < cold


def test_draft_rows_wait_in_full_and_known_rows_only_past_the_overlap():
    charge = PleCharge("disk")
    known, inside = charge.rows(ROUND)
    assert (known, inside) == ((64 - 48) * 16, 48 * 16)
    long_overlap = charge.exposed_ms(ROUND, overlap_ms=1e6)  # known rows fully hidden
    drafts_only = PleCharge("disk").exposed_ms(
        Execution(GraphKind.SPECULATIVE, 48, 16, 48, 16, 0, draft_steps=3), overlap_ms=1e6
    )
    assert long_overlap == drafts_only > 0
    assert charge.exposed_ms(PREFILL, overlap_ms=1e6) == 0  # a prompt's rows are all known


@pytest.mark.parametrize(
    "spec, message",
    [("h200+ple:ssd", "ple residency 'ssd'"), ("h200+ple:disk,hit=2", "hit=2"),
     ("h200+ple:host,fast", "unknown ple flag 'fast'")],
)  # fmt: skip
def test_a_bad_ple_device_spec_is_one_line_naming_it(spec, message):
    with pytest.raises(DeviceError, match=message):
        device_with_ple(spec)


def test_simulate_shows_the_residency_in_device_time(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text(TRACE)
    device_ms = {}
    for device in ("h200", "h200+ple:disk"):
        args = ["simulate", "--trace", str(trace), "--rate", "2", "--compare", "vllm",
                "--json", "--device", device, *SMALL]  # fmt: skip
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        helios = json.loads(result.output)["results"][0]
        device_ms[device] = sum(helios["device_ms_by_class"].values())
    assert device_ms["h200+ple:disk"] > device_ms["h200"]
