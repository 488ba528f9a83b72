"""OpenAI-compatible completion bodies (/v1/completions, /tokenize, /detokenize) under
server/body.py's rules and server/sampling_fields.py's sampling fields."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

from pydantic import Field, field_validator

from ignition.runtime.requests.request import SamplingParams
from ignition.server import schema_rules
from ignition.server.body import (
    NOT_SERVED,
    Body,
    Bool,
    Int,
    NeutralFalse,
    Text,
    TokenId,
    valid_unicode,
)
from ignition.server.sampling_fields import MAX_CHOICES, MAX_LOGPROBS, SamplingFields

MAX_PROMPTS = 64


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


class CompletionRequest(SamplingFields):
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


class TokenizeCompletionRequest(Body):
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


class DetokenizeRequest(Body):
    model: Text | None = None
    tokens: list[TokenId]

    @field_validator("tokens")
    @classmethod
    def _ids(cls, value: list[int]) -> list[int]:
        return _token_list(value, "tokens")
