"""From a chat request and the server's flags to how its replies are parsed:
``tool_choice`` with OpenAI's semantics and vLLM's flags (docs/server.md, "tool_choice").
"""

from __future__ import annotations

from dataclasses import dataclass

from ignition.runtime.grammar import GrammarSpec
from ignition.server.chat_protocol import ChatCompletionRequest
from ignition.server.config import ServerConfig
from ignition.server.errors import ApiError
from ignition.server.tools.base import ToolCallParser, tool_call_parser_class
from ignition.server.tools.grammar import forced_call_spec
from ignition.server.tools.output import ReplyParser
from ignition.server.tools.reasoning import (
    ReasoningParser,
    opens_reasoning,
    reasoning_parser_class,
)


@dataclass(frozen=True)
class ReplyPlan:
    """What one chat request's replies need: a call format, a forced call, reasoning.
    ``function``: the function a named tool_choice forces (None: any declared one)."""

    tools: type[ToolCallParser] | None = None
    declared: tuple[dict, ...] = ()
    forced: bool = False
    function: str | None = None
    reasoning: type[ReasoningParser] | None = None
    thinking: bool = True
    single_call: bool = False  # parallel_tool_calls = false

    @property
    def parses(self) -> bool:
        return self.tools is not None or self.reasoning is not None

    def grammar_spec(self, after_reasoning: bool = False) -> GrammarSpec | None:
        """The grammar a forced call's reply follows (None when no call is forced);
        ``after_reasoning``: it starts after the reasoning block (``reasoning_end``)."""
        if not self.forced or self.tools is None:
            return None
        return forced_call_spec(
            self.tools, self.declared, self.function, self.single_call, after_reasoning
        )

    def reasoning_end(self, prompt: str) -> str | None:
        """The tag a structured output starts after: the reasoning block's end tag when the
        reply starts inside one that is parsed out (--reasoning-parser, thinking on, the
        prompt opens it); None: the grammar applies from the first reply token."""
        if self.reasoning is None or not self.thinking:
            return None
        start, end = self.reasoning.start_tag, self.reasoning.end_tag
        return end if opens_reasoning(prompt, start, end) else None

    def parser(self, prompt: str) -> ReplyParser | None:
        """A fresh parser for one choice; ``prompt``: the rendered prompt."""
        if not self.parses:
            return None
        reasoning = None
        if self.reasoning is not None:
            start, end = self.reasoning.start_tag, self.reasoning.end_tag
            reasoning = self.reasoning(opens_reasoning(prompt, start, end), self.thinking)
        tools = self.tools(self.declared) if self.tools is not None else None
        return ReplyParser(reasoning, tools, self.forced, self.single_call)


def plan_reply(body: ChatCompletionRequest, config: ServerConfig) -> ReplyPlan:
    """The request's plan, or a 400 that names the flag or field it lacks (or the
    structured output a forced call cannot be combined with)."""
    reasoning = None
    if config.reasoning_parser is not None:
        reasoning = reasoning_parser_class(config.reasoning_parser)
    thinking = (body.chat_template_kwargs or {}).get("enable_thinking") is not False
    choice = body.tool_choice
    if not body.tools or choice == "none":
        return ReplyPlan(reasoning=reasoning, thinking=thinking)
    forced = choice not in (None, "auto")
    if not forced and not config.enable_auto_tool_choice:
        raise ApiError(
            400,
            "tool_choice = 'auto' (the default with tools) needs the server started with "
            "--enable-auto-tool-choice; send tool_choice 'none' to describe tools without "
            "parsing calls",
            param="tool_choice",
        )
    if config.tool_call_parser is None:
        shown = "'required'" if choice == "required" else "a named function"
        raise ApiError(
            400,
            f"tool_choice = {shown} needs a tool-call format: this server's chat template "
            "renders none that ignition knows; start it with --tool-call-parser",
            param="tool_choice",
        )
    other = body.grammar_spec() if forced else None
    if other is not None:
        raise ApiError(
            400,
            f"tool_choice = {'required' if choice == 'required' else 'a named function'} "
            f"is enforced by a grammar and cannot be combined with {other.field}: send one",
            param="tool_choice",
        )
    parser = tool_call_parser_class(config.tool_call_parser)
    _check_names(parser, body)
    return ReplyPlan(
        tools=parser,
        declared=tuple(t.model_dump(exclude_none=True) for t in body.tools),
        forced=forced,
        function=body.named_function,
        reasoning=reasoning,
        thinking=thinking,
        single_call=body.parallel_tool_calls is False,
    )


def _check_names(parser: type[ToolCallParser], body: ChatCompletionRequest) -> None:
    """A 400 for a function or top-level parameter name the call format cannot carry:
    the model's call of it would be read back as another name (or not at all)."""
    for i, tool in enumerate(body.tools or ()):
        names = [(f"tools[{i}].function.name", tool.function.name)]
        properties = (tool.function.parameters or {}).get("properties")
        if isinstance(properties, dict):
            field = f"tools[{i}].function.parameters.properties"
            names += [(field, key) for key in properties]
        for field, name in names:
            problem = parser.name_problem(name)
            if problem is not None:
                raise ApiError(
                    400,
                    f"{field}: the name {name!r} cannot be written in the "
                    f"{parser.name} tool-call format ({problem})",
                    param=field,
                )
