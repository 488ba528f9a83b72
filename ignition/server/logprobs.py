"""Logprobs in OpenAI's shapes (completions, chat) and vLLM's prompt logprobs, from the
engine's per-token :class:`TokenLogprob`: raw logprobs, vLLM's default (docs/server.md,
"Logprobs").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ignition.runtime.requests.request import PromptLogprob, TokenLogprob

TokenText = Callable[[int], str]
FLOOR = -9999.0


def _value(logprob: float) -> float:
    return max(FLOOR, logprob)


class CompletionLogprobs:
    """The legacy shape for one choice, accumulated across chunks (offsets carry over)."""

    def __init__(self, token_text: TokenText, num_alternatives: int, text_offset: int = 0):
        self._text = token_text
        self._k = num_alternatives
        self.offset = text_offset

    def body(self, items: Sequence[TokenLogprob]) -> dict[str, Any]:
        tokens, values, tops, offsets = [], [], [], []
        for item in items:
            text = self._text(item.token_id)
            tokens.append(text)
            values.append(_value(item.logprob))
            offsets.append(self.offset)
            self.offset += len(text)
            tops.append(_legacy_top(text, item.logprob, item.top, self._k, self._text))
        return _legacy_body(tokens, values, tops, offsets)


def _legacy_top(
    text: str,
    logprob: float,
    top: Sequence[tuple[int, float]],
    num_alternatives: int,
    token_text: TokenText,
) -> dict[str, float] | None:
    """One position's ``top_logprobs`` entry: the alternatives by text, the chosen token
    always among them (OpenAI's legacy shape lists it even when it ranks below k)."""
    if not num_alternatives:
        return None
    entry = {token_text(t): _value(v) for t, v in top[:num_alternatives]}
    entry.setdefault(text, _value(logprob))
    return entry


def _legacy_body(tokens: list[str], values: list, tops: list, offsets: list[int]) -> dict[str, Any]:
    return {
        "tokens": tokens,
        "token_logprobs": values,
        "top_logprobs": tops,
        "text_offset": offsets,
    }


def prompt_logprobs_body(
    items: Sequence[PromptLogprob | None], token_text: TokenText
) -> list[dict[str, dict[str, Any]] | None]:
    """vLLM's ``prompt_logprobs``: the prompt token first, then its alternatives by rank."""

    def entry(logprob: float, rank: int, token: int) -> dict[str, Any]:
        return {"logprob": _value(logprob), "rank": rank, "decoded_token": token_text(token)}

    body: list[dict[str, dict[str, Any]] | None] = []
    for item in items:
        if item is None:
            body.append(None)
            continue
        position = {str(item.token_id): entry(item.logprob, item.rank, item.token_id)}
        for rank, (token, logprob) in enumerate(item.top, start=1):
            position.setdefault(str(token), entry(logprob, rank, token))
        body.append(position)
    return body


def echoed_prompt_logprobs(
    prompt_ids: Sequence[int],
    items: Sequence[PromptLogprob | None],
    token_text: TokenText,
    num_alternatives: int,
) -> dict[str, Any]:
    """The legacy shape of an echoed prompt: its tokens from text offset 0, the first one's
    logprob and top null (nothing precedes it), as vLLM's ``echo`` with ``logprobs``."""
    tokens, values, tops, offsets = [], [], [], []
    offset = 0
    for token, item in zip(prompt_ids, items, strict=True):
        text = token_text(token)
        tokens.append(text)
        offsets.append(offset)
        offset += len(text)
        if item is None:
            values.append(None)
            tops.append(None)
            continue
        values.append(_value(item.logprob))
        tops.append(_legacy_top(text, item.logprob, item.top, num_alternatives, token_text))
    return _legacy_body(tokens, values, tops, offsets)


def joined(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Two legacy bodies one after the other (the echoed prompt, then the output)."""
    return {key: first[key] + second[key] for key in first}


def chat_logprobs(
    items: Sequence[TokenLogprob], token_text: TokenText, num_alternatives: int
) -> dict[str, Any]:
    def entry(token: int, logprob: float) -> dict[str, Any]:
        text = token_text(token)
        return {"token": text, "logprob": _value(logprob), "bytes": list(text.encode("utf-8"))}

    content = []
    for item in items:
        body = entry(item.token_id, item.logprob)
        body["top_logprobs"] = [entry(t, v) for t, v in item.top[:num_alternatives]]
        content.append(body)
    return {"content": content}


def cumulative_logprob(items: Sequence[TokenLogprob]) -> float:
    """What best_of ranks candidates by: the sum of their tokens' logprobs."""
    return sum(item.logprob for item in items)
