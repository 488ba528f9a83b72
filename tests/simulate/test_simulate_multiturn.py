"""``ignition simulate --conversations``: a multi-turn workload with retention on and off
(issue 10, the simulated comparison on a multi-turn workload)."""

from __future__ import annotations

import itertools
import json

import pytest
from click.testing import CliRunner

from ignition.cli import main
from ignition.helios.config import PolicyConfig
from ignition.simulate.devices import H200Roofline
from ignition.simulate.harness import helios_catalog
from ignition.simulate.multiturn import run_retention
from ignition.simulate.multiturn_turns import MultiTurnSpec, build_turns

SMALL = MultiTurnSpec(
    conversations=3, turns=3, first_prompt=300, turn_prompt=40, output_tokens=6, think_ms=50
)
CLI_SMALL = (
    *("--conversations", "2", "--turns", "2", "--slots", "2", "--first-prompt", "200"),
    *("--turn-prompt", "30", "--turn-output", "4", "--think-ms", "20"),
)


def run(*args: str):
    return CliRunner().invoke(main, ["simulate", *args])


def test_every_turn_resends_the_history_with_its_message_endpoints():
    for turns in build_turns(SMALL):
        for before, after in itertools.pairwise(turns):
            history = (*before.prompt, *before.reply, 3)
            assert after.prompt[: len(history)] == history
            assert after.history == len(history)
            assert set(before.ends) < set(after.ends) and len(history) in after.ends


@pytest.fixture(scope="module")
def runs():
    """The restore mechanics: SMALL's histories fit one prefill launch, so the pay-off rule
    (runtime/retention/payoff.py) would skip every restore; these runs keep them all."""
    catalog = helios_catalog("qwen38", 2, 128, speculation="off")
    return {
        rows: run_retention(SMALL, rows, catalog, slots=2, device=H200Roofline(), payoff=False)
        for rows in (0, 12)
    }


def test_retention_restores_later_turns_and_saves_their_prefill(runs):
    off, on = runs[0], runs[12]
    assert off.later_cached_tokens == 0 and off.restores == 0
    assert on.restores > 0 and on.history_share > 0.9
    assert on.prefill_tokens < off.prefill_tokens
    assert on.outputs == off.outputs  # the same planned replies either way


def test_the_command_prints_one_row_per_snapshot_row_count():
    # CLI_SMALL's histories fit one prefill launch: without the pay-off rule, so it restores
    result = run(*CLI_SMALL, "--snapshot-rows", "0,8", "--json", "--no-scheduler-checkpoint-payoff")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert [r["snapshot_rows"] for r in report["runs"]] == [0, 8]
    assert report["runs"][0]["cached_share_of_history"] == 0
    assert report["runs"][1]["cached_share_of_history"] > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--snapshot-rows", "0,x"), "--snapshot-rows '0,x'"),
        (("--snapshot-rows", "-1"), "--snapshot-rows '-1'"),
        (("--conversation-rate", "nan"), "--conversation-rate = nan"),
        (("--think-ms", "-5"), "--think-ms = -5.0"),
        (("--turn-prompt", "2"), "turn prompt 2"),
    ],
)
def test_bad_multiturn_values_fail_with_one_line_naming_them(args, message):
    result = run(*CLI_SMALL, *args)
    assert result.exit_code == 2
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_the_multiturn_simulation_runs_without_torch():
    """``ignition simulate`` needs no model: the engine loop and checkpoint cache it
    drives are torch-free."""
    import subprocess
    import sys

    code = (
        "import sys, ignition.simulate.retention_command, ignition.simulate.multiturn;"
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_restored_turn_consumes_its_remainder_in_one_prompt_launch(monkeypatch):
    """Table C of issue 10: a remainder of a message plus two tokens must not be cut at a
    prepared capacity, stranding a 2-token tail behind the decoders (helios/tails.py)."""
    from ignition.helios import LaneRole
    from ignition.simulate import multiturn_worker

    chunks: dict[str, list[int]] = {}
    launch = multiturn_worker.SimulatedWorker.launch

    def recording(self, plan, fence, live):
        for lane in plan.lanes:
            if lane.role is LaneRole.PROMPT:
                name = live[lane.handle].request.request_id
                chunks.setdefault(name, []).append(lane.num_prompt_tokens)
        return launch(self, plan, fence, live)

    monkeypatch.setattr(multiturn_worker.SimulatedWorker, "launch", recording)
    spec = MultiTurnSpec(
        conversations=3, turns=2, first_prompt=300, turn_prompt=128, output_tokens=16, think_ms=50
    )
    catalog = helios_catalog("qwen38", 2, 128, speculation="off")
    on = run_retention(spec, 8, catalog, slots=2, device=H200Roofline(), payoff=False)
    assert on.restores == 3
    later = {name: sizes for name, sizes in chunks.items() if not name.endswith("t0")}
    assert later and all(sizes == [130] for sizes in later.values()), later


def test_the_multiturn_simulation_runs_helios_with_the_first_delivery_option(monkeypatch):
    """Issue 10b: ``--scheduler-first-delivery W`` reaches every run's PolicyConfig."""
    from ignition.simulate import harness

    seen = []
    real = harness.run_retention

    def recording(*args, **kwargs):
        seen.append(kwargs["policy"].first_delivery)
        return real(*args, **kwargs)

    monkeypatch.setattr(harness, "run_retention", recording)
    result = run(*CLI_SMALL, "--snapshot-rows", "0,4", "--scheduler-first-delivery", "1")
    assert result.exit_code == 0, result.output
    assert seen == [1.0, 1.0]


def test_a_restored_turn_waits_no_longer_than_an_uncached_one_under_the_bounded_start():
    """Issue 10: a restored turn's ~130-token remainder costs a whole prompt launch on
    the MoE roofline; started at the whole-prompt newcomer rate it was priced about
    capacity / remainder too low and waited behind the decoders. Bounded by what it can
    absorb (helios/state/prompt_starts.py) it starts as soon as the uncached turn would."""
    spec = MultiTurnSpec(conversations=4, turns=2, first_prompt=1024, turn_prompt=128)
    catalog = helios_catalog("qwen38", 2, 128, speculation="off")

    def later_ttft(rows: int, rule: str = "balanced") -> float:
        policy = PolicyConfig(newcomer_rule=rule)
        ttft = run_retention(
            spec, rows, catalog, slots=2, device=H200Roofline(), policy=policy, payoff=False
        )
        return sum(ttft.later_turn_ttft_ms) / len(ttft.later_turn_ttft_ms)

    off, on = later_ttft(0), later_ttft(8)
    whole_prompt_on = later_ttft(8, "whole-prompt")
    assert on < whole_prompt_on - 10.0  # the earlier start left it waiting
    assert on <= off + 1.0  # simulated time: one prompt launch either way


def _retention(spec: MultiTurnSpec, rows: int, payoff: bool = True):
    catalog = helios_catalog("qwen38", 2, 128, speculation="off")
    return run_retention(spec, rows, catalog, slots=2, device=H200Roofline(), payoff=payoff)


def test_retention_that_saves_no_prefill_launch_does_no_work_and_matches_retention_off():
    """docs/scheduling.md, "Retention pays only where it saves prefill launches": a
    1024-token first prompt and 128-token turns fit one weight-bound launch whether or
    not the history is restored, so no restore pays (only the first turns' captures,
    taken before a later turn predicts the next message, are copied) and the turns see
    the retention-off run (issue 10d: at saturation the restores made it slower)."""
    spec = MultiTurnSpec(conversations=4, turns=3, first_prompt=1024, turn_prompt=128)
    off, on = _retention(spec, 0), _retention(spec, 8)
    assert on.restores == 0 and on.later_cached_tokens == 0
    assert on.later_turn_ttft_ms == off.later_turn_ttft_ms
    assert on.makespan_ms == off.makespan_ms
    assert _retention(spec, 8, payoff=False).restores > 0  # the rule is what skips them


def test_retention_still_restores_histories_whose_restore_saves_a_prefill_launch():
    spec = MultiTurnSpec(
        conversations=3, turns=3, first_prompt=4096, turn_prompt=256, output_tokens=16
    )
    off, on = _retention(spec, 0), _retention(spec, 8)
    assert on.restores == 6 and on.prefill_tokens < off.prefill_tokens
    assert sum(on.later_turn_ttft_ms) < sum(off.later_turn_ttft_ms)
