"""Tool calls and reasoning in chat replies: format parsers behind registries, registered
(qwen3_coder, hermes; reasoning qwen3) by importing this package."""

from __future__ import annotations

from ignition.server.tools import hermes, qwen3_coder  # noqa: F401  (registration)
from ignition.server.tools.base import (
    TOOL_CALL_PARSERS,
    ToolCallParser,
    detect_tool_call_parser,
    tool_call_parser_class,
)
from ignition.server.tools.output import Delta, ReplyParser
from ignition.server.tools.reasoning import (
    REASONING_PARSERS,
    ReasoningParser,
    opens_reasoning,
    reasoning_parser_class,
)

__all__ = [
    "REASONING_PARSERS",
    "TOOL_CALL_PARSERS",
    "Delta",
    "ReasoningParser",
    "ReplyParser",
    "ToolCallParser",
    "detect_tool_call_parser",
    "opens_reasoning",
    "reasoning_parser_class",
    "tool_call_parser_class",
]
