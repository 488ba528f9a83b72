"""HTTP options shared by ``serve`` and ``debug-serve``, with the reply parsers (tool
calls and reasoning; vLLM's flags)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from ignition.cli.checks import check_range
from ignition.cli.errors import UserError
from ignition.cli.registry import Decorator
from ignition.runtime.proposals.copy_proposals import MAX_NGRAM, MIN_NGRAM, PromptLookup
from ignition.runtime.proposals.registry import methods


def reply_parsing_options() -> list[Decorator]:
    """Tool calls and reasoning in chat replies (server/tools/; vLLM's flags)."""
    from ignition.server.tools import REASONING_PARSERS, TOOL_CALL_PARSERS

    return [
        click.option(
            "--tool-call-parser",
            type=click.Choice(sorted(TOOL_CALL_PARSERS)),
            help="Tool-call format of replies (default: the one the chat template renders).",
        ),
        click.option(
            "--enable-auto-tool-choice",
            is_flag=True,
            help='Parse tool calls for tool_choice "auto" (without it such requests get 400).',
        ),
        click.option(
            "--reasoning-parser",
            type=click.Choice(sorted(REASONING_PARSERS)),
            help="Split <think>...</think> into reasoning_content (default: no split).",
        ),
    ]


def server_options() -> list[Decorator]:
    from ignition.server.config import DEFAULT_MAX_REQUEST_BYTES

    return [
        click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind."),
        click.option(
            "--port",
            type=int,
            default=8000,
            show_default=True,
            help="TCP port to listen on.",
        ),
        click.option(
            "--served-model-name",
            "served_model_names",
            multiple=True,
            help="Name clients send as `model` (repeatable: the first is reported, all are "
            "accepted; default: the recipe name).",
        ),
        *reply_parsing_options(),
        click.option(
            "--api-key",
            envvar="IGNITION_API_KEY",
            help="Require `Authorization: Bearer KEY` on /v1/* (env IGNITION_API_KEY).",
        ),
        click.option(
            "--max-request-bytes",
            type=int,
            default=DEFAULT_MAX_REQUEST_BYTES,
            show_default=True,
            help="Largest request body; larger ones get 413 before any parsing.",
        ),
        click.option(
            "--speculative-method",
            type=click.Choice(methods()),
            default="mtp",
            show_default=True,
            help="Where requests' speculative drafts come from when they name none (vLLM's "
            'speculative_config "method"): mtp, the model\'s MTP head; ngram, copies of the '
            "request's own prompt and output (prompt lookup); both, Helios chooses between "
            "the two for every round by their measured acceptance. A request's "
            "`speculative_method` field overrides it.",
        ),
        click.option(
            "--prompt-lookup-max",
            type=int,
            default=MAX_NGRAM,
            show_default=True,
            help="Copy proposals: the longest suffix of a request's tokens looked up in its "
            "prompt and output (vLLM's prompt_lookup_max).",
        ),
        click.option(
            "--prompt-lookup-min",
            type=int,
            default=MIN_NGRAM,
            show_default=True,
            help="Copy proposals: the shortest suffix looked up before a round has no copy "
            "(vLLM's prompt_lookup_min).",
        ),
        click.option(
            "--trace-file",
            help="Write a Chrome trace-event / Perfetto JSON trace of the engine's frames, "
            "requests and counters here (open it in ui.perfetto.dev); a ring of the newest "
            "events, rewritten every 2 s off the engine thread and at shutdown.",
        ),
        click.option(
            "--disable-dashboard",
            is_flag=True,
            help="No live page at GET /dashboard (and no trace recorder unless --trace-file).",
        ),
        click.option(
            "--allowed-local-media-path",
            type=click.Path(exists=True, file_okay=False, resolve_path=True),
            help="Folder whose image files chat requests may name by path or file:// URL "
            "(default: none; base64 data URLs only, and nothing is fetched over the network).",
        ),
    ]


@dataclass(frozen=True)
class ServerArgs:
    """Where the server listens, the names it answers to, its request limits and how it
    parses replies."""

    host: str
    port: int
    served_model_names: tuple[str, ...]
    tool_call_parser: str | None
    enable_auto_tool_choice: bool
    reasoning_parser: str | None
    api_key: str | None
    max_request_bytes: int
    allowed_local_media_path: str | None
    speculative_method: str = "mtp"
    prompt_lookup_max: int = MAX_NGRAM
    prompt_lookup_min: int = MIN_NGRAM
    trace_file: str | None = None
    dashboard: bool = True

    def __post_init__(self) -> None:
        check_range("--port", self.port, 1, 65535)
        check_range("--max-request-bytes", self.max_request_bytes, 1)
        check_range("--prompt-lookup-min", self.prompt_lookup_min, 1)
        check_range("--prompt-lookup-max", self.prompt_lookup_max, self.prompt_lookup_min)
        if self.trace_file is not None:
            from ignition.runtime.tracing.writer import check_trace_path

            try:
                check_trace_path(self.trace_file)
            except ValueError as err:
                raise UserError(str(err)) from None

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> ServerArgs:
        """Take (pop) this group's flags out of a command's keyword arguments."""
        return cls(
            host=params.pop("host"),
            port=params.pop("port"),
            served_model_names=tuple(params.pop("served_model_names")),
            tool_call_parser=params.pop("tool_call_parser"),
            enable_auto_tool_choice=params.pop("enable_auto_tool_choice"),
            reasoning_parser=params.pop("reasoning_parser"),
            api_key=params.pop("api_key"),
            max_request_bytes=params.pop("max_request_bytes"),
            allowed_local_media_path=params.pop("allowed_local_media_path"),
            speculative_method=params.pop("speculative_method"),
            prompt_lookup_max=params.pop("prompt_lookup_max"),
            prompt_lookup_min=params.pop("prompt_lookup_min"),
            trace_file=params.pop("trace_file", None),
            dashboard=not params.pop("disable_dashboard", False),
        )

    def serve_fields(self) -> dict[str, Any]:
        """This group's ServeOptions fields (host and port go to the listener instead)."""
        return {
            "served_model_names": self.served_model_names,
            "api_key": self.api_key,
            "max_request_bytes": self.max_request_bytes,
            "allowed_local_media_path": self.allowed_local_media_path,
            "tool_call_parser": self.tool_call_parser,
            "enable_auto_tool_choice": self.enable_auto_tool_choice,
            "reasoning_parser": self.reasoning_parser,
            "speculative_method": self.speculative_method,
            "prompt_lookup": PromptLookup(self.prompt_lookup_max, self.prompt_lookup_min),
            "trace_file": self.trace_file,
            "dashboard": self.dashboard,
        }
