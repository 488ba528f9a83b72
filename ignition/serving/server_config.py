"""The HTTP options of a served bundle: serve's flags plus what its templates imply."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ignition.runtime.bundle import Bundle, BundleError
from ignition.runtime.chat.template_files import ChatTemplates
from ignition.server.config import ServerConfig
from ignition.server.tokenizing import max_chars_per_token
from ignition.serving.engine import ServeOptions

if TYPE_CHECKING:
    from ignition.runtime.chat.template import ChatRenderer


def server_config(options: ServeOptions, bundle: Bundle, chat: ChatRenderer) -> ServerConfig:
    """The HTTP options; tool-call format detected unless --tool-call-parser names one."""
    from ignition.server.tools import detect_tool_call_parser

    templates = list(chat.templates.templates.values())
    try:
        return ServerConfig(
            served_model_names=options.served_model_names or (bundle.name,),
            api_key=options.api_key,
            max_request_bytes=options.max_request_bytes,
            tool_call_parser=options.tool_call_parser or detect_tool_call_parser(templates),
            enable_auto_tool_choice=options.enable_auto_tool_choice,
            reasoning_parser=options.reasoning_parser,
            template_renders_tools=template_renders_tools(chat.templates),
            max_chars_per_token=max_chars_per_token(bundle.tokenizer),
            vllm_metrics=options.metrics_names == "vllm",
            dashboard=options.dashboard,
        )
    except ValueError as err:
        raise BundleError(f"{chat.templates.source}: {err}") from None


def template_renders_tools(templates: ChatTemplates) -> bool:
    """Whether the tools template reads ``tools`` (one that does not would drop tools
    silently, so the server refuses them); an unparsable template counts as reading them."""
    from jinja2 import TemplateSyntaxError, meta

    from ignition.runtime.chat.sandbox import chat_environment

    _name, source = templates.select(has_tools=True)
    try:
        parsed = chat_environment().parse(source)
    except TemplateSyntaxError:
        return True
    return "tools" in meta.find_undeclared_variables(parsed)
