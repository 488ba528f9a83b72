"""A newcomer's start rate, bounded by the prompt it can absorb."""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass

# Newcomer rules whose start is bounded by the request's prompt (utility.NEWCOMER_RULES).
BOUNDED_RULES = ("balanced",)


@dataclass(frozen=True)
class PromptStarts:
    """x_norm(R) as a step table over the measured graphs' per-stream shares."""

    shares: tuple[float, ...]
    below: tuple[float, ...]  # below[i]: max s / T over graphs [0, i); 0 at i = 0
    fastest: tuple[float, ...]  # fastest[i]: min T over graphs [i, n); inf at i = n
    full: float  # R at or above this takes the unbounded start exactly
    generation: float  # x_gen
    start: float  # the unbounded start, sqrt(x_gen * x_norm)

    def rate(self, prompt_tokens: int) -> float:
        """The start of a request whose uncached prompt is ``prompt_tokens``."""
        if prompt_tokens >= self.full:
            return self.start
        i = bisect.bisect_right(self.shares, prompt_tokens)
        absorbable = max(self.below[i], prompt_tokens / self.fastest[i])
        return min(self.start, math.sqrt(self.generation * absorbable))


def prompt_starts(
    rates: Iterable[tuple[float, float]], generation: float | None, start: float | None
) -> PromptStarts | None:
    """The table from each measured graph's (per-stream share, duration ms); None when
    either yardstick is missing (the start then is whichever one exists)."""
    graphs = sorted((s, t) for s, t in rates if s > 0 and t > 0)
    if generation is None or start is None or not graphs:
        return None
    shares = tuple(s for s, _ in graphs)
    below = [0.0]
    for s, t in graphs:
        below.append(max(below[-1], s / t))
    fastest = [math.inf]
    for _, t in reversed(graphs):
        fastest.append(min(fastest[-1], t))
    fastest.reverse()
    best = max(range(len(graphs)), key=lambda i: graphs[i][0] / graphs[i][1])
    return PromptStarts(shares, tuple(below), tuple(fastest), graphs[best][0], generation, start)
