"""From a chat request and the server's flags to how its replies are parsed.

``tool_choice`` (OpenAI's semantics, vLLM's flags):

- "none": the template describes no tools and nothing is parsed as a call;
- "auto" (the default when tools are given): calls are parsed when the server runs
  with ``--enable-auto-tool-choice``; without it the request is refused, as in vLLM,
  rather than returning call markup as content;
- "required" and a named function are forced without a grammar engine: the server
  prefills the format's call opening as the start of the assistant turn (the whole
  opening with the function's name when one is named or only one tool is given; up
  to the name otherwise), closing an open reasoning block first. The model can then
  only continue a call. What the prefill cannot guarantee (that a required call names
  a declared function, that the arguments match the schema) is checked where it can
  be: a reply that holds no call or calls an undeclared function fails with an error.
"""

from __future__ import annotations

from dataclasses import dataclass

from ignition.server.chat_protocol import ChatCompletionRequest
from ignition.server.config import ServerConfig
from ignition.server.errors import ApiError
from ignition.server.tools.base import ToolCallParser, tool_call_parser_class
from ignition.server.tools.output import ReplyParser
from ignition.server.tools.reasoning import (
    Qwen3ReasoningParser,
    ReasoningParser,
    opens_reasoning,
    reasoning_parser_class,
)


@dataclass(frozen=True)
class ReplyPlan:
    """What one chat request's replies need: a call format, a forced opening, reasoning."""

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

    def continuation(self, prompt: str) -> str:
        """The text a forced call prefills after the rendered prompt ('' when not forced)."""
        if not self.forced or self.tools is None:
            return ""
        tags = self.reasoning or Qwen3ReasoningParser
        close = (
            f"{tags.end_tag}\n\n" if opens_reasoning(prompt, tags.start_tag, tags.end_tag) else ""
        )
        return close + self.tools.opening(self.function)

    def reasoning_end(self, prompt: str) -> str | None:
        """The tag a structured output starts after: the reasoning block's end tag when the
        reply starts inside one that is parsed out (--reasoning-parser, thinking on, the
        prompt opens it); None: the grammar applies from the first reply token."""
        if self.reasoning is None or not self.thinking or self.forced:
            return None
        start, end = self.reasoning.start_tag, self.reasoning.end_tag
        return end if opens_reasoning(prompt, start, end) else None

    def parser(self, prompt: str) -> ReplyParser | None:
        """A fresh parser for one choice; ``prompt``: the rendered prompt, prefill included."""
        if not self.parses:
            return None
        reasoning = None
        if self.reasoning is not None:
            start, end = self.reasoning.start_tag, self.reasoning.end_tag
            reasoning = self.reasoning(opens_reasoning(prompt, start, end), self.thinking)
        tools = self.tools(self.declared) if self.tools is not None else None
        prefill = tools.opening(self.function) if tools is not None and self.forced else ""
        return ReplyParser(reasoning, tools, prefill, self.forced, self.single_call)


def plan_reply(body: ChatCompletionRequest, config: ServerConfig) -> ReplyPlan:
    """The request's plan, or a 400 that names the flag or field it lacks."""
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
    return ReplyPlan(
        tools=tool_call_parser_class(config.tool_call_parser),
        declared=tuple(t.model_dump(exclude_none=True) for t in body.tools),
        forced=forced,
        function=body.forced_function,
        reasoning=reasoning,
        thinking=thinking,
        single_call=body.parallel_tool_calls is False,
    )
