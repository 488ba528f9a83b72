"""The serve flags for tool calls and reasoning: detection, refusals at start-up."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from tokenizers import Tokenizer

from ignition.cli import main
from ignition.runtime.bundle import BundleError
from ignition.runtime.chat.template_files import ChatTemplates
from ignition.server.config import ServerConfig
from ignition.serving.engine import ServeOptions
from ignition.serving.server_config import server_config

TOKENIZER = Path(__file__).resolve().parents[2] / "ignition/assets/qwen38-tiny/tokenizer.json"
QWEN35_SHAPE = (Path(__file__).resolve().parents[1] / "runtime" / "qwen35_shape.jinja").read_text()


def config_for(template: str, **options) -> ServerConfig:
    chat = SimpleNamespace(templates=ChatTemplates({"default": template}, "chat_template.jinja"))
    bundle = SimpleNamespace(name="qwen", tokenizer=Tokenizer.from_file(str(TOKENIZER)))
    return server_config(ServeOptions(artifacts="unused", **options), bundle, chat)


def test_the_tool_call_format_is_detected_from_the_chat_template():
    assert config_for(QWEN35_SHAPE).tool_call_parser == "qwen3_coder"
    assert config_for("{{ messages }}").tool_call_parser is None


def test_a_named_parser_wins_over_the_template():
    assert config_for(QWEN35_SHAPE, tool_call_parser="hermes").tool_call_parser == "hermes"


def test_auto_tool_choice_with_a_template_that_renders_no_known_format_is_refused():
    with pytest.raises(BundleError, match=r"chat_template\.jinja: --enable-auto-tool-choice needs"):
        config_for("{{ messages }}", enable_auto_tool_choice=True)


def test_reasoning_parser_is_carried_to_the_server():
    assert config_for("{{ messages }}", reasoning_parser="qwen3").reasoning_parser == "qwen3"


@pytest.mark.parametrize("flag", ["--tool-call-parser", "--reasoning-parser"])
def test_an_unknown_parser_name_is_a_usage_error_listing_the_choices(flag, tmp_path):
    result = CliRunner().invoke(main, ["serve", "--artifacts", str(tmp_path), flag, "nope"])
    assert result.exit_code == 2
    assert f"Invalid value for '{flag}': 'nope' is not" in result.output
