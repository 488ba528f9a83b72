"""Copy proposals (prompt lookup): drafts copied from a request's own context.

Where an output repeats its context (code edits, retrieval answers, structured rewrites),
the tokens after the latest occurrence of the output's last n-gram are likely next. The
proposal is the continuation of the longest suffix n-gram (``max_ngram`` down to
``min_ngram`` tokens) found earlier in prompt + output, its latest occurrence first, at
most ``max_tokens`` long. The search looks back at most ``window`` tokens, so its work
per request and frame is bounded. Host-side and model-free: the drafts are supplied to a
speculative program (model.proposals), which verifies them like any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MAX_NGRAM = 4
MIN_NGRAM = 2
WINDOW = 2048


@dataclass(frozen=True)
class PromptLookup:
    """A server's copy-proposal search (vLLM's speculative_config ``prompt_lookup_max``
    and ``prompt_lookup_min``; ``ignition serve --prompt-lookup-max/--prompt-lookup-min``):
    the suffix lengths tried, longest first, and how far back they are looked for."""

    max_ngram: int = MAX_NGRAM
    min_ngram: int = MIN_NGRAM
    window: int = WINDOW

    def __post_init__(self) -> None:
        if self.min_ngram < 1:
            raise ValueError(f"--prompt-lookup-min = {self.min_ngram}: must be at least 1")
        if self.max_ngram < self.min_ngram:
            raise ValueError(
                f"--prompt-lookup-max = {self.max_ngram}: must be at least --prompt-lookup-min "
                f"({self.min_ngram})"
            )
        if self.window <= self.max_ngram:
            raise ValueError(
                f"prompt lookup window = {self.window}: must exceed --prompt-lookup-max "
                f"({self.max_ngram})"
            )


def copy_proposal(
    context: Sequence[int],
    max_tokens: int,
    max_ngram: int = MAX_NGRAM,
    min_ngram: int = MIN_NGRAM,
    window: int = WINDOW,
) -> tuple[int, ...]:
    """The tokens that followed the latest earlier occurrence of ``context``'s longest
    suffix n-gram, at most ``max_tokens``; () when no suffix of ``min_ngram`` tokens or
    more recurs within the last ``window`` tokens."""
    if min_ngram < 1 or max_ngram < min_ngram:
        raise ValueError(
            f"copy proposals need 1 <= min_ngram <= max_ngram; got min_ngram={min_ngram} "
            f"max_ngram={max_ngram}"
        )
    if max_tokens <= 0:
        return ()
    tokens = list(context[-window:])
    end = len(tokens)
    for n in range(min(max_ngram, end - 1), min_ngram - 1, -1):
        suffix = tokens[end - n :]
        # latest occurrence that ends before the suffix itself and has a continuation
        for start in range(end - n - 1, -1, -1):
            if tokens[start : start + n] == suffix:
                follow = tokens[start + n : start + n + max_tokens]
                return tuple(follow)
    return ()
