"""What the HTTP layer is told at startup, apart from the engine."""

from __future__ import annotations

from dataclasses import dataclass

# Large enough for a full 128k-token prompt as JSON-escaped text, small enough that a
# runaway body is refused before anything parses it.
DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class ServerConfig:
    """``served_model_names``: the first is reported, all are accepted as ``model``
    (empty: the engine's own name). ``api_key``: Bearer auth on /v1/* when set."""

    served_model_names: tuple[str, ...] = ()
    api_key: str | None = None
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    tool_call_parser: str | None = None
    enable_auto_tool_choice: bool = False
    reasoning_parser: str | None = None
    # False when the chat template never reads ``tools``: a request with tools is a 400
    # rather than a prompt that silently omits them (serving.template_renders_tools).
    template_renders_tools: bool = True
    # The most characters one token stands for (server/tokenizing.py); None: prompts are
    # not bounded by length before tokenizing.
    max_chars_per_token: int | None = None
    # Large-prompt tokenizer work admitted at once, in characters (0: 4 request bodies).
    max_queued_tokenizer_chars: int = 0
    vllm_metrics: bool = False  # /metrics also exports vllm:* aliases (server/metrics.py)
    dashboard: bool = True  # GET /dashboard (server/dashboard.py); --disable-dashboard: off

    def __post_init__(self) -> None:
        if self.max_request_bytes < 1:
            raise ValueError(f"max_request_bytes = {self.max_request_bytes}: must be >= 1")
        if any(not name for name in self.served_model_names):
            raise ValueError("a served model name is empty")
        from ignition.server.tools import reasoning_parser_class, tool_call_parser_class

        if self.tool_call_parser is not None:
            tool_call_parser_class(self.tool_call_parser)
        if self.reasoning_parser is not None:
            reasoning_parser_class(self.reasoning_parser)
        if self.enable_auto_tool_choice and self.tool_call_parser is None:
            raise ValueError(
                "--enable-auto-tool-choice needs a tool-call format: name one with "
                "--tool-call-parser (the chat template renders none that ignition knows)"
            )
        if not self.max_queued_tokenizer_chars:
            object.__setattr__(self, "max_queued_tokenizer_chars", 4 * self.max_request_bytes)
