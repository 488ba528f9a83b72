"""Logprobs in OpenAI's two shapes, from the engine's per-token :class:`TokenLogprob`.

- completions (the legacy shape): parallel lists ``tokens``, ``token_logprobs``,
  ``top_logprobs`` (a ``{token: logprob}`` map per position holding the ``logprobs``
  most likely tokens and the chosen one, as vLLM does; ``None`` when 0 are asked) and
  ``text_offset`` (each token's character offset in the choice's text, echo included);
- chat: ``{"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}``.

The values are raw logprobs (vLLM's default ``raw_logprobs`` mode): the model's own
distribution before penalties, bias, temperature or top-k / top-p. JSON has no -inf, so
a logprob is reported as at least -9999, as vLLM does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ignition.runtime.requests import TokenLogprob

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
            if self._k:
                top = {self._text(t): _value(v) for t, v in item.top[: self._k]}
                top.setdefault(text, _value(item.logprob))
                tops.append(top)
            else:
                tops.append(None)
        return {
            "tokens": tokens,
            "token_logprobs": values,
            "top_logprobs": tops,
            "text_offset": offsets,
        }


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
