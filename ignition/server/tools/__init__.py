"""Tool calls and reasoning in chat replies: format parsers behind registries.

Importing the package registers the formats (qwen3_coder, hermes) and the reasoning
parser (qwen3); server/tools/choice.py turns a request's ``tool_choice`` into how its
reply is parsed and, for a forced call, the grammar it follows (server/tools/grammar.py).
"""

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
