"""The sampling fields completions and chat completions share, and their translation into
the runtime's :class:`SamplingParams`: vLLM's ranges and semantics (penalties, ``min_p``,
``min_tokens``, ``logit_bias`` with its keys checked against the vocabulary, ``logprobs``
as raw logprobs), at most one structured output."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from ignition.runtime.grammar import GrammarSpec
from ignition.runtime.proposals.registry import methods
from ignition.runtime.requests.request import (
    MAX_REPETITION_PENALTY,
    MIN_REPETITION_PENALTY,
    SamplingParams,
)
from ignition.server import schema_rules
from ignition.server.body import Body, Bool, Float, Int, PositiveInt, StopText, Text, TokenId
from ignition.server.structured_protocol import (
    ResponseFormat,
    StructuredOutputs,
    guided_spec,
    schema_text,
)

# vLLM's older structured-output fields (deprecated there for structured_outputs).
GUIDED_FIELDS = ("guided_json", "guided_regex", "guided_choice", "guided_grammar")
MAX_STOP_STRINGS = 8
MAX_CHOICES = 16
MAX_TOP_K = 2**31 - 1
MAX_LOGPROBS = 20  # alternatives per token, OpenAI's and vLLM's cap
MAX_LOGIT_BIAS = 300  # entries of one logit_bias map (model.logits_processing)

# The speculative methods the schema offers (runtime/proposals/registry.py).
METHODS = methods()


class StreamOptions(Body):
    include_usage: Bool = False
    continuous_usage_stats: Bool = False


class SamplingFields(Body):
    """Fields shared by completions and chat completions."""

    model: Text | None = None
    max_tokens: PositiveInt | None = None
    temperature: Float = Field(default=1.0, ge=0.0, le=100.0)
    top_p: Float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: Int = Field(default=0, ge=-1, le=MAX_TOP_K, description="0 or -1: disabled")
    min_p: Float = Field(default=0.0, ge=0.0, le=1.0)
    seed: Int | None = None
    stop: StopText | Annotated[list[StopText], Field(max_length=MAX_STOP_STRINGS)] | None = None
    stop_token_ids: list[TokenId] | None = None
    include_stop_str_in_output: Bool = False
    skip_special_tokens: Bool = True
    stream: Bool = False
    stream_options: StreamOptions | None = None
    n: Int = Field(default=1, ge=1, le=MAX_CHOICES)
    user: Text | None = None
    ignore_eos: Bool = False
    presence_penalty: Float = Field(default=0.0, ge=-2.0, le=2.0)
    frequency_penalty: Float = Field(default=0.0, ge=-2.0, le=2.0)
    repetition_penalty: Float = Field(
        default=1.0, ge=MIN_REPETITION_PENALTY, le=MAX_REPETITION_PENALTY
    )
    min_tokens: Int = Field(default=0, ge=0)
    # Token id (as a string) -> bias; values are clamped to [-100, 100] as vLLM does.
    logit_bias: dict[str, Float] | None = Field(
        default=None,
        json_schema_extra={
            "maxProperties": MAX_LOGIT_BIAS,
            "propertyNames": {"pattern": "^[0-9]+$"},
        },
    )
    # Structured outputs (server/structured_protocol.py): at most one of these.
    response_format: ResponseFormat | None = None
    structured_outputs: StructuredOutputs | None = None
    guided_json: Any = Field(default=None, json_schema_extra={"type": ["object", "string", "null"]})
    guided_regex: Text | None = None
    guided_choice: Annotated[list[Text], Field(min_length=1)] | None = None
    guided_grammar: Annotated[Text, Field(min_length=1)] | None = None
    # vLLM's extension: the raw logprob and rank of every prompt token after the first,
    # with this many alternatives per position (not streamed, as in vLLM).
    prompt_logprobs: Annotated[Int, Field(ge=0, le=MAX_LOGPROBS)] | None = None
    # Ignition's extension: where this request's speculative drafts come from, named as
    # vLLM's speculative_config "method" (mtp: the model's MTP head; ngram: copies of its
    # own prompt and output; both: Helios chooses between them for every round; or a
    # method registered in runtime/proposals/registry.py before this module is imported,
    # so that the schema names it). Default: the server's --speculative-method.
    speculative_method: Literal[METHODS] | None = None  # type: ignore[valid-type]

    @classmethod
    def schema_rules(cls) -> list[dict[str, Any]]:
        return [
            *schema_rules.stream_options_need_stream(),
            *schema_rules.not_streamed("prompt_logprobs", 0),
        ]

    @field_validator("guided_json")
    @classmethod
    def _guided_schema(cls, value: Any) -> str | None:
        return None if value is None else schema_text(value)

    @model_validator(mode="after")
    def _one_structured_output(self) -> SamplingFields:
        given = [name for name in GUIDED_FIELDS if getattr(self, name) is not None]
        if self.structured_outputs is not None:
            given.insert(0, "structured_outputs")
        if self.response_format is not None and self.response_format.type != "text":
            given.insert(0, "response_format")
        if len(given) > 1:
            raise ValueError(
                f"{' and '.join(given)}: a request takes one structured output constraint"
            )
        return self

    def grammar_spec(self) -> GrammarSpec | None:
        """The grammar every output token must follow; None: free text."""
        if self.response_format is not None and self.response_format.type != "text":
            return self.response_format.grammar()
        if self.structured_outputs is not None:
            return self.structured_outputs.grammar_spec()
        for name in GUIDED_FIELDS:
            value = getattr(self, name)
            if value is not None:
                return guided_spec(name, value)
        return None

    @field_validator("stream_options")
    @classmethod
    def _stream_options_need_stream(cls, value: StreamOptions | None, info) -> Any:
        if value is not None and not info.data.get("stream"):
            raise ValueError("stream_options is only allowed with stream = true")
        return value

    @field_validator("prompt_logprobs")
    @classmethod
    def _prompt_logprobs_not_streamed(cls, value: int | None, info) -> int | None:
        if value and info.data.get("stream"):
            raise ValueError("`prompt_logprobs` are not available when `stream=True`")
        return value

    @field_validator("stop")
    @classmethod
    def _stop_list(cls, value: str | list[str] | None) -> list[str]:
        return [value] if isinstance(value, str) else list(value or [])

    @field_validator("stop_token_ids")
    @classmethod
    def _nonnegative_ids(cls, value: list[int] | None) -> list[int] | None:
        for i, token in enumerate(value or ()):
            if token < 0:
                raise ValueError(f"[{i}] = {token}: token ids are nonnegative")
        return value

    @field_validator("logit_bias")
    @classmethod
    def _bias_ids(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        """Keys are token ids written as strings (the vocabulary check needs the model and
        happens in the app: :meth:`logit_bias_ids`)."""
        if len(value or {}) > MAX_LOGIT_BIAS:
            raise ValueError(f"holds {len(value)} entries; at most {MAX_LOGIT_BIAS}")
        for key in value or {}:
            if not (key.isascii() and key.isdecimal()):
                raise ValueError(f"key {key!r} is not a token id (a nonnegative integer)")
        return value

    @field_validator("min_tokens")
    @classmethod
    def _min_tokens_within_max(cls, value: int, info) -> int:
        max_tokens = info.data.get("max_tokens")
        if max_tokens is not None and value > max_tokens:
            raise ValueError(f"min_tokens = {value} exceeds max_tokens = {max_tokens}")
        return value

    def logit_bias_ids(self, vocab_size: int | None) -> tuple[tuple[int, float], ...]:
        """(token id, clamped bias) pairs; a key outside the vocabulary raises ValueError."""
        pairs = []
        for key, bias in (self.logit_bias or {}).items():
            token = int(key)
            if vocab_size is not None and token >= vocab_size:
                raise ValueError(
                    f"logit_bias key {key!r} is not a token id of this model: its vocabulary "
                    f"has {vocab_size} ids (0..{vocab_size - 1})"
                )
            pairs.append((token, max(-100.0, min(100.0, bias))))
        return tuple(pairs)

    @property
    def num_logprobs(self) -> int | None:
        """Alternatives per output token the response shows; None: no logprobs."""
        return None

    @property
    def num_prompt_logprobs(self) -> int | None:
        """Alternatives per prompt position the engine scores; None: none scored."""
        return self.prompt_logprobs

    @property
    def echoes_logprobs(self) -> bool:
        """Whether the legacy logprobs start with the echoed prompt's tokens."""
        return False

    def sampling(self, default_max_tokens: int, vocab_size: int | None = None) -> SamplingParams:
        return SamplingParams(
            max_tokens=self.max_tokens or default_max_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=max(0, self.top_k),
            seed=self.seed,
            stop=tuple(self.stop or ()),
            ignore_eos=self.ignore_eos,
            stop_token_ids=tuple(self.stop_token_ids or ()),
            include_stop_str_in_output=self.include_stop_str_in_output,
            skip_special_tokens=self.skip_special_tokens,
            presence_penalty=self.presence_penalty,
            frequency_penalty=self.frequency_penalty,
            repetition_penalty=self.repetition_penalty,
            min_p=self.min_p,
            min_tokens=self.min_tokens,
            logit_bias=self.logit_bias_ids(vocab_size),
            logprobs=self.num_logprobs,
            prompt_logprobs=self.num_prompt_logprobs,
            speculative_method=self.speculative_method or "mtp",
        )

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)

    @property
    def continuous_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.continuous_usage_stats)
