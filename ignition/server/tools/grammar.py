"""The grammar that enforces ``tool_choice`` "required" or a named function: one xgrammar
structural tag per declared tool, written as JSON (runtime/grammar.py compiles it), so the
reply always parses into ``tool_calls`` (docs/server.md, "Forced tool calls").
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ignition.runtime.grammar import GrammarError, GrammarSpec, RequestGrammar
from ignition.server.tools.base import ToolCallParser

ANY_OBJECT: dict[str, Any] = {"type": "object"}


def arguments_schema(tool: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON schema a call's arguments follow: the tool's ``parameters``; any object when
    it declares none or is not strict."""
    function = tool.get("function", {})
    parameters = function.get("parameters")
    if function.get("strict") is False or not parameters:
        return ANY_OBJECT
    return parameters


def forced_call_spec(
    parser: type[ToolCallParser],
    tools: Sequence[Mapping[str, Any]],
    function: str | None,
    single_call: bool = False,
    after_reasoning: bool = False,
) -> GrammarSpec:
    """The grammar of a reply to ``tool_choice`` = ``function`` (named) or "required"
    (``function`` None); ``single_call``: parallel_tool_calls is false;
    ``after_reasoning``: the grammar starts after a reasoning block's end tag."""
    tags = {
        tool["function"]["name"]: parser.call_tag(tool["function"]["name"], arguments_schema(tool))
        for tool in tools
    }
    if function is not None:
        reply: dict[str, Any] = tags[function]
    else:
        reply = {
            "type": "tags_with_separator",
            "tags": list(tags.values()),
            "separator": "\n",
            "at_least_one": True,
            "stop_after_first": single_call,
        }
    if after_reasoning:
        blank = {"type": "regex", "pattern": "\\n{0,2}"}
        reply = {"type": "sequence", "elements": [blank, reply]}
    return _spec(parser, reply, "tool_choice")


def tool_error(
    compile_grammar: Callable[[GrammarSpec], RequestGrammar],
    parser: type[ToolCallParser],
    tools: Sequence[Mapping[str, Any]],
    failure: GrammarError,
) -> GrammarError:
    """The error to report when a forced call's grammar did not compile: the first tool
    whose own call does not compile, named with its ``parameters`` field; else ``failure``
    (also when a call with any arguments does not compile either: the server cannot
    compile grammars at all). Runs only after a failure, one compilation per tool."""
    try:
        compile_grammar(_spec(parser, parser.call_tag("probe", ANY_OBJECT), "tool_choice"))
    except GrammarError:
        return failure
    for i, tool in enumerate(tools):
        name = tool["function"]["name"]
        field = f"tools[{i}].function.parameters"
        try:
            compile_grammar(_spec(parser, parser.call_tag(name, arguments_schema(tool)), field))
        except GrammarError as err:
            return GrammarError(
                f"{field}: the schema of the tool {name!r} cannot be enforced by a grammar "
                f'(tool_choice forces a call): {err.detail}; declare it with "strict": false '
                "to constrain only the call's shape",
                field,
                err.detail,
            )
    return failure


def _spec(parser: type[ToolCallParser], reply: dict[str, Any], field: str) -> GrammarSpec:
    source = json.dumps({"type": "structural_tag", "format": reply}, ensure_ascii=False)
    return GrammarSpec("structural_tag", source, field, json_values=parser.json_arguments)
