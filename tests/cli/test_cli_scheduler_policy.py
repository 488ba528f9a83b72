"""Issue 25's contract: ``ignition serve``'s default ``--scheduler-policy`` is ``balanced``,
and the PolicyConfig the engine is given (``ServeOptions.policy``, copied into the
runtime's options by ``serving``) is that preset's, with each override applied once."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from ignition.cli import main
from ignition.helios.config import DEFAULT_PRESET, policy_from_preset


@pytest.fixture
def served(monkeypatch):
    """Run `serve` up to the point where it would load: the ServeOptions it would serve."""
    import ignition.cli.serve_common
    import ignition.serving.forever

    seen = []
    monkeypatch.setattr(
        ignition.serving.forever, "serve_forever", lambda o, *a, **k: seen.append(o)
    )
    # nothing listens: whether the default port is free here is not these tests' business
    monkeypatch.setattr(ignition.cli.serve_common, "check_port_free", lambda host, port: None)
    return seen


@pytest.fixture
def bundle(tmp_path):
    path = tmp_path / "bundle"
    path.mkdir()
    (path / "manifest.json").write_text("{}")
    return path


def serve(*args: str) -> None:
    result = CliRunner().invoke(main, ["serve", *args])
    assert result.exit_code == 0, result.output


def test_the_default_scheduler_policy_is_the_objective_preset():
    option = next(p for p in main.commands["serve"].params if p.name == "scheduler_policy")
    assert option.default == DEFAULT_PRESET == "objective"


def test_without_the_flag_the_engine_gets_the_objective_policy(served, bundle):
    serve(str(bundle))
    assert served[0].policy == policy_from_preset("objective")
    assert served[0].policy != policy_from_preset("balanced")


def test_the_seeds_balanced_preset_reaches_the_engine_when_asked_for(served, bundle):
    serve(str(bundle), "--scheduler-policy", "balanced")
    assert served[0].policy == policy_from_preset("balanced")


def test_the_throughput_preset_reaches_the_engine_when_asked_for(served, bundle):
    serve(str(bundle), "--scheduler-policy", "throughput")
    assert served[0].policy == policy_from_preset("throughput")


def test_overrides_apply_over_the_default_preset(served, bundle):
    serve(
        str(bundle), "--scheduler-terminal-value", "7", "--mtp-adaptive-verification-alpha", "0.5"
    )
    expected = policy_from_preset(
        DEFAULT_PRESET, terminal_value=7.0, adaptive_verification_alpha=0.5
    )
    assert served[0].policy == expected


def _runtime_options(serve_options):
    from types import SimpleNamespace

    from ignition.serving.engine import runtime_options

    bundle = SimpleNamespace(
        path="bundle",
        manifest={"runtime": {"speculation": "fixed", "num_slots": 4, "page_size": 64}},
        model=SimpleNamespace(config=SimpleNamespace(max_position_embeddings=4096)),
    )
    return runtime_options(serve_options, bundle)


def test_the_just_in_time_second_slot_is_on_by_default_at_the_runtimes_lead(served, bundle):
    """--scheduler-queue-lead-ms: the CLI's default is the runtime's, and it reaches the
    runtime's options (docs/scheduling.md, "Just-in-time second frame slot")."""
    from ignition.runtime.assembly import RuntimeOptions
    from ignition.runtime.loop.second_slot import DEFAULT_QUEUE_LEAD_MS

    option = next(p for p in main.commands["serve"].params if p.name == "scheduler_queue_lead_ms")
    assert float(option.default) == DEFAULT_QUEUE_LEAD_MS == RuntimeOptions().queue_lead_ms == 5.0
    serve(str(bundle))
    assert served[0].queue_lead_ms == DEFAULT_QUEUE_LEAD_MS
    assert _runtime_options(served[0]).queue_lead_ms == DEFAULT_QUEUE_LEAD_MS


@pytest.mark.parametrize("given, expected", [("off", None), ("2.5", 2.5), ("0", 0.0)])
def test_the_queue_lead_reaches_the_runtime_or_is_turned_off(served, bundle, given, expected):
    serve(str(bundle), "--scheduler-queue-lead-ms", given)
    assert served[0].queue_lead_ms == expected
    assert _runtime_options(served[0]).queue_lead_ms == expected


@pytest.mark.parametrize("given", ["soon", "-1", "nan"])
def test_a_bad_queue_lead_is_a_one_line_error_naming_the_flag(served, bundle, given):
    result = CliRunner().invoke(main, ["serve", str(bundle), "--scheduler-queue-lead-ms", given])
    assert result.exit_code != 0
    assert "--scheduler-queue-lead-ms" in result.output and given in result.output
    assert not served
