"""The ``ignition/cli/`` package keeps the old ``cli.py``'s interface: the same commands,
and for each the same option strings, in the same order, with the same defaults.

``cli_options.json`` was captured from the single-file parser before the split (issue 26);
a change to a flag is a change to this file, made on purpose.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from ignition.cli import main

BEFORE = json.loads((Path(__file__).parent / "cli_options.json").read_text())
OPTION = re.compile(r"(?<![\w-])(--?[a-zA-Z][\w-]*)")


def _help(*args: str) -> str:
    result = CliRunner().invoke(main, [*args, "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    return result.output


def _default(param: click.Parameter) -> object:
    value = param.default
    return None if value is None or type(value).__name__ == "Sentinel" else value


def _listed_options(help_text: str) -> set[str]:
    """The option strings in the first column of the help's Options section."""
    section = help_text.split("\nOptions:\n", 1)[1]
    first_columns = [
        re.split(r"\s{2,}", line.strip())[0]
        for line in section.splitlines()
        if line.startswith("  -")
    ]
    return {name for column in first_columns for name in OPTION.findall(column)}


def test_the_help_lists_the_same_commands_as_before():
    section = _help().split("\nCommands:\n", 1)[1]
    listed = [line.split()[0] for line in section.splitlines() if line.strip()]
    assert listed == sorted(BEFORE)
    assert set(main.commands) == set(BEFORE)


@pytest.mark.parametrize("command", sorted(BEFORE))
def test_each_command_takes_the_same_option_strings_in_the_same_order(command):
    params = main.commands[command].params
    assert [[*p.opts, *p.secondary_opts] for p in params] == [
        row["opts"] for row in BEFORE[command]
    ]


@pytest.mark.parametrize("command", sorted(BEFORE))
def test_each_option_keeps_its_default(command):
    params = main.commands[command].params
    defaults = {
        p.opts[0]: _default(p)
        for p in params
        if isinstance(p, click.Option) and _default(p) is not None
    }
    assert defaults == {
        row["opts"][0]: row["default"] for row in BEFORE[command] if "default" in row
    }


@pytest.mark.parametrize("command", sorted(BEFORE))
def test_each_command_help_lists_exactly_its_option_strings(command):
    recorded = {
        name
        for row in BEFORE[command]
        for name in row["opts"]
        if name.startswith("-")  # serve's PATH is an argument
    }
    assert _listed_options(_help(command)) == recorded | {"-h", "--help"}


def test_serve_parses_the_flags_vllm_users_type():
    from ignition.server.tools import REASONING_PARSERS, TOOL_CALL_PARSERS

    tool_parser, reasoning_parser = sorted(TOOL_CALL_PARSERS)[0], sorted(REASONING_PARSERS)[0]
    argv = [
        "some/model",
        *("--max-num-seqs", "8", "--max-model-len", "4096", "--served-model-name", "m"),
        *("--chat-template", "{{ messages }}", "--no-enable-prefix-caching"),
        *("--tool-call-parser", tool_parser, "--enable-auto-tool-choice"),
        *("--reasoning-parser", reasoning_parser, "--metrics-names", "vllm"),
    ]
    params = main.commands["serve"].make_context("serve", argv).params
    assert params["max_num_seqs"] == 8 and params["max_context"] == 4096
    assert params["served_model_names"] == ("m",)
    assert params["chat_template"] == "{{ messages }}"
    assert params["enable_prefix_caching"] is False
    assert params["tool_call_parser"] == tool_parser and params["enable_auto_tool_choice"]
    assert params["reasoning_parser"] == reasoning_parser
    assert params["metrics_names"] == "vllm"
