"""OpenAI-compatible request bodies.

Requests are validated here, before the engine sees them, so a bad parameter
becomes a 400 with OpenAI's error body and never reaches the scheduler. The
rules follow what OpenAI and vLLM clients send:

- explicit ``null`` means "not given" for every optional field (SDKs send it);
- unknown fields are ignored with one log line, as vLLM does, so a newer client
  keeps working;
- types are strict: ``true`` is not a token id, ``"yes"`` is not a boolean and
  ``NaN`` is not a temperature;
- every string must be valid Unicode: a lone surrogate (legal in JSON, illegal
  in UTF-8) would otherwise fail deep in the tokenizer;
- a field we accept but do not implement (``suffix``) must stay at its neutral
  value: a client that asks for something and gets none deserves to know;
- sampling options follow vLLM's ranges and semantics (penalties, ``min_p``,
  ``min_tokens``, ``logit_bias`` with its keys checked against the vocabulary,
  ``logprobs`` as raw logprobs, ``best_of`` ranked by cumulative logprob).

The chat bodies (messages, content parts, tools) are in server/chat_protocol.py.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import replace
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from ignition.runtime.grammar import GrammarSpec
from ignition.runtime.requests import (
    MAX_REPETITION_PENALTY,
    MIN_REPETITION_PENALTY,
    SamplingParams,
)
from ignition.server import schema_rules
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
MAX_PROMPTS = 64
MAX_TOP_K = 2**31 - 1
MAX_LOGPROBS = 20  # alternatives per token, OpenAI's and vLLM's cap
MAX_LOGIT_BIAS = 300  # entries of one logit_bias map (model.logits_processing)
log = logging.getLogger("ignition.server")


def valid_unicode(value: str) -> str:
    """Reject lone surrogates: JSON allows ``\\ud800`` but no tokenizer can encode it."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        bad = value[err.start].encode("utf-8", "backslashreplace").decode()
        raise ValueError(
            f"contains a lone surrogate {bad} at character {err.start}; text must be valid Unicode"
        ) from None
    return value


def _integer(value: Any) -> Any:
    """JSON Schema's integers: 3 and 3.0, never true or "3"."""
    if isinstance(value, bool):
        raise ValueError("must be an integer, not a boolean")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Text = Annotated[str, Field(strict=True), AfterValidator(valid_unicode)]
StopText = Annotated[str, Field(strict=True, min_length=1), AfterValidator(valid_unicode)]
Int = Annotated[int, BeforeValidator(_integer), Field(strict=True)]
PositiveInt = Annotated[Int, Field(ge=1)]
TokenId = Annotated[Int, Field(ge=0)]
Bool = Annotated[bool, Field(strict=True)]
Float = Annotated[float, Field(strict=True, allow_inf_nan=False)]
# A vLLM flag this server does not serve: only false is accepted (the schema says so).
NeutralFalse = Annotated[bool, Field(strict=True, json_schema_extra={"enum": [False]})]
NOT_SERVED = "send it unset (or null, false, empty)"


def _schema_extra(schema: dict[str, Any], cls: type[_Body]) -> None:
    schema_rules.add_rules(schema, cls.schema_rules())


class _Body(BaseModel):
    """Nulls are absent, unknown fields are dropped with one log line. A body whose
    validators compare fields says the same in its schema (``schema_rules``)."""

    model_config = ConfigDict(extra="ignore", json_schema_extra=_schema_extra)

    @classmethod
    def schema_rules(cls) -> list[dict[str, Any]]:
        """The cross-field rules of this body's validators, as JSON Schema."""
        return []

    @model_validator(mode="before")
    @classmethod
    def _nulls_and_unknowns(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        fields = cls.model_fields
        unknown = sorted(k for k in data if k not in fields)
        if unknown:
            log.warning(
                "%s: ignoring unknown fields %s", cls.__name__, ", ".join(map(repr, unknown))
            )
        return {
            k: v
            for k, v in data.items()
            if k in fields and not (v is None and not fields[k].is_required())
        }


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | int | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail


def error_body(
    message: str, kind: str, param: str | None = None, code: str | int | None = None
) -> dict:
    return ErrorResponse(
        error=ErrorDetail(message=message, type=kind, param=param, code=code)
    ).model_dump()


class StreamOptions(_Body):
    include_usage: Bool = False
    continuous_usage_stats: Bool = False


class _SamplingFields(_Body):
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
    # own prompt and output; both: Helios chooses between them for every round). Default:
    # the server's --speculative-method.
    speculative_method: Literal["mtp", "ngram", "both"] | None = None

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
    def _one_structured_output(self) -> _SamplingFields:
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


def _token_list(value: list[Any], where: str) -> list[int]:
    value = [int(t) if isinstance(t, float) and t.is_integer() else t for t in value]
    for i, token in enumerate(value):
        if isinstance(token, bool) or not isinstance(token, int):
            shown = "true" if token is True else "false" if token is False else repr(token)
            raise ValueError(f"{where}[{i}] = {shown}: token ids must be integers")
        if token < 0:
            raise ValueError(f"{where}[{i}] = {token}: token ids must be nonnegative")
    return value


def normalize_prompt(value: Any) -> list[str | list[int]]:
    """One prompt or several: a string, token ids, a list of strings or of id lists."""
    shape = "a string, a list of token ids, a list of strings or a list of token-id lists"
    if isinstance(value, str):
        return [valid_unicode(value)] if value else _empty("prompt")
    if not isinstance(value, list):
        raise ValueError(f"must be {shape}")
    if not value:
        _empty("prompt")
    nested = all(isinstance(p, str | list) for p in value)
    if nested and len(value) > MAX_PROMPTS:
        raise ValueError(f"holds {len(value)} prompts; at most {MAX_PROMPTS} per request")
    if all(isinstance(p, str) for p in value):
        for i, p in enumerate(value):
            if not p:
                _empty(f"prompt[{i}]")
            valid_unicode(p)
        return list(value)
    if all(isinstance(p, list) for p in value):
        for i, p in enumerate(value):
            if not p:
                _empty(f"prompt[{i}]")
        return [_token_list(p, f"prompt[{i}]") for i, p in enumerate(value)]
    if any(isinstance(p, list | str) for p in value):
        raise ValueError(f"must be {shape}, not a mix")
    return [_token_list(value, "prompt")]


def _empty(where: str) -> list:
    raise ValueError(f"{where} is empty")


class CompletionRequest(_SamplingFields):
    prompt: Any = Field(
        json_schema_extra={
            "anyOf": [
                {"type": "string", "minLength": 1},
                {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1},
                    "minItems": 1,
                    "maxItems": MAX_PROMPTS,
                },
                {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1},
                {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": MAX_PROMPTS,
                    "items": {
                        "type": "array",
                        "items": {"type": "integer", "minimum": 0},
                        "minItems": 1,
                    },
                },
            ]
        }
    )
    echo: Bool = False
    suffix: Annotated[str, Field(max_length=0)] | None = None
    best_of: Annotated[Int, Field(ge=1, le=MAX_CHOICES)] | None = None
    logprobs: Annotated[Int, Field(ge=0, le=MAX_LOGPROBS)] | None = None

    @classmethod
    def schema_rules(cls) -> list[dict[str, Any]]:
        return schema_rules.completion_rules(MAX_CHOICES)

    @field_validator("prompt", mode="before")
    @classmethod
    def _prompt(cls, value: Any) -> list[str | list[int]]:
        return normalize_prompt(value)

    @field_validator("suffix", mode="before")
    @classmethod
    def _no_suffix(cls, value: Any) -> Any:
        if value:
            raise ValueError("suffix is not supported")
        return value

    @field_validator("best_of")
    @classmethod
    def _best_of_at_least_n(cls, value: int | None, info) -> int | None:
        n, stream = info.data.get("n", 1), info.data.get("stream", False)
        if value is not None and value < n:
            raise ValueError(f"best_of = {value} must be at least n = {n}")
        if value is not None and value > 1 and stream:
            raise ValueError(
                f"best_of = {value} cannot be streamed (only 1 can): the best candidates are "
                "known only when all of them have finished"
            )
        return value

    @property
    def num_candidates(self) -> int:
        """Completions generated per prompt: best_of, of which the n best are returned."""
        return self.best_of or self.n

    @property
    def num_logprobs(self) -> int | None:
        return self.logprobs

    @property
    def num_prompt_logprobs(self) -> int | None:
        """As vLLM: ``echo`` with ``logprobs`` scores the prompt with that many
        alternatives unless ``prompt_logprobs`` says otherwise."""
        if self.prompt_logprobs is None and self.echoes_logprobs:
            return self.logprobs
        return self.prompt_logprobs

    @property
    def echoes_logprobs(self) -> bool:
        return self.echo and self.logprobs is not None

    def sampling(self, default_max_tokens: int, vocab_size: int | None = None) -> SamplingParams:
        sampling = super().sampling(default_max_tokens, vocab_size)
        if self.num_candidates > self.n and sampling.logprobs is None:
            # Ranking needs each candidate's cumulative logprob; none are shown.
            sampling = replace(sampling, logprobs=0)
        return sampling

    @property
    def prompts(self) -> list[str | list[int]]:
        return self.prompt


class TokenizeCompletionRequest(_Body):
    """vLLM's /tokenize for a prompt (``add_special_tokens``: as completions tokenize it;
    ``return_token_strs`` is not served, a 400 when set)."""

    model: Text | None = None
    prompt: Text
    add_special_tokens: Bool = True
    return_token_strs: NeutralFalse = False

    @field_validator("return_token_strs", mode="before")
    @classmethod
    def _not_served(cls, value: Any) -> Any:
        if value:
            raise ValueError(f"return_token_strs is not supported by this server: {NOT_SERVED}")
        return value


class DetokenizeRequest(_Body):
    model: Text | None = None
    tokens: list[TokenId]

    @field_validator("tokens")
    @classmethod
    def _ids(cls, value: list[int]) -> list[int]:
        return _token_list(value, "tokens")


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def now_s() -> int:
    return int(time.time())


def usage(num_prompt: int, num_output: int, num_cached: int = 0) -> dict[str, Any]:
    """OpenAI usage; ``prompt_tokens_details.cached_tokens`` counts prompt tokens served
    from a retained checkpoint, as vLLM reports prefix-cache hits."""
    return {
        "prompt_tokens": num_prompt,
        "completion_tokens": num_output,
        "total_tokens": num_prompt + num_output,
        "prompt_tokens_details": {"cached_tokens": num_cached},
    }
