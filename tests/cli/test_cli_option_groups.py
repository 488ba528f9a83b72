"""Option groups are frozen dataclasses checked once, when built from the parsed flags;
commands are registered by module; ``simulate`` has one entry point."""

from __future__ import annotations

import dataclasses
import importlib

import pytest
from click.testing import CliRunner

from ignition.cli import main
from ignition.cli.app import COMMAND_MODULES
from ignition.cli.errors import UserError
from ignition.cli.scheduler_options import SchedulerArgs
from ignition.cli.server_options import ServerArgs
from ignition.simulate.command import CommandError
from ignition.simulate.options import SimulateOptions


def server(**changes) -> ServerArgs:
    fields = dict(
        host="127.0.0.1",
        port=8000,
        served_model_names=(),
        tool_call_parser=None,
        enable_auto_tool_choice=False,
        reasoning_parser=None,
        api_key=None,
        max_request_bytes=1,
    )
    return ServerArgs(**{**fields, "allowed_local_media_path": None, **changes})


def test_every_registered_module_declares_the_command_the_group_runs():
    names = [importlib.import_module(f"ignition.cli.{m}").COMMAND.name for m in COMMAND_MODULES]
    assert sorted(names) == sorted(main.commands)


def test_an_option_group_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        server().port = 1  # type: ignore[misc]


def test_a_bad_value_is_refused_when_the_group_is_built_naming_flag_and_value():
    with pytest.raises(UserError, match=r"--port = 70000: must be 1\.\.65535"):
        server(port=70000)


def test_prefix_caching_off_is_zero_snapshot_rows():
    assert SchedulerArgs().with_prefix_caching(False).snapshot_rows == 0
    with pytest.raises(UserError, match=r"--snapshot-rows = 4: .*pick one"):
        SchedulerArgs(snapshot_rows=4).with_prefix_caching(False)


def test_simulate_options_refuse_a_negative_think_time_when_built():
    with pytest.raises(CommandError, match=r"--think-ms = -5\.0: must be finite and nonnegative"):
        SimulateOptions(think_ms=-5.0)


def test_the_simulate_command_runs_the_one_entry_point_with_its_options(monkeypatch):
    import ignition.simulate.runner

    seen = []
    monkeypatch.setattr(ignition.simulate.runner, "run", lambda options: seen.append(options))
    args = ["simulate", "--scenario", "examples/scenarios/h200-mixed.yaml", "--json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert seen == [SimulateOptions(scenario="examples/scenarios/h200-mixed.yaml", as_json=True)]


def test_prompt_lookup_flags_reach_the_served_options_as_one_search():
    from types import SimpleNamespace

    from ignition.runtime.proposals.copy_proposals import PromptLookup
    from ignition.serving.engine import ServeOptions, runtime_options

    fields = server(prompt_lookup_max=6, prompt_lookup_min=3).serve_fields()
    assert fields["prompt_lookup"] == PromptLookup(6, 3)
    options = ServeOptions("bundle", indexer_kv_dtype="auto", **fields)
    bundle = SimpleNamespace(
        path="bundle",
        manifest={"runtime": {"speculation": "fixed", "num_slots": 4, "page_size": 64}},
        model=SimpleNamespace(config=SimpleNamespace(max_position_embeddings=4096)),
    )
    assert runtime_options(options, bundle).prompt_lookup == PromptLookup(6, 3)
