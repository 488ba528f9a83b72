"""A newcomer's start rate, bounded by the prompt it can absorb.

The newcomer rule (docs/scheduling.md) starts a request without token history at
x0 = sqrt(x_gen * x_norm). x_norm is the best rate a prompt-consuming stream gets from
one graph, useful(G, k) / (k * T(G)): on the qwen38 catalog a 4096-token prefill
shared by k streams. A request whose uncached prompt is R tokens can take at most R of
a graph's per-stream share, so the rate any graph could actually serve it at is

    x_norm(R) = max over measured graphs G of min(useful(G, k) / k, R) / T(G),

which equals x_norm for a long prompt and falls towards R / T for a short one. The start
sqrt(x_gen * x_norm(R)) is the newcomer rule with that honest yardstick. It matters
because on a MoE roofline every prompt launch costs about as much as a long prefill: a
restored conversation turn (retention leaves ~130 tokens) or a short first prompt
started as if it had been served at long-prefill speed, so its price was about
capacity / R too low and it waited ~100 ms behind decoders until the fairness price had
grown. Long prompts (R at least the winning graph's share) keep exactly the rule's
start. Decode and speculative graphs take part (their share is at most one token), so
x_norm(R) never falls below x_gen and a newcomer never starts below parity with the
best-served decoder.

R is a per-request constant, the prompt tokens after any restored checkpoint: the start
applies only while the request has no token history, and every site that reads it
(both projections, the service update at commit) must agree.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass

# Newcomer rules whose start is bounded by the request's prompt (utility.NEWCOMER_RULES).
BOUNDED_RULES = ("balanced",)


@dataclass(frozen=True)
class PromptStarts:
    """x_norm(R) as a step table over the measured graphs' per-stream shares.

    Graphs sorted by share s_i = useful_i / k: graphs with s_i <= R contribute
    s_i / T_i (``below``, a running maximum), the others R / T_i, largest at the
    fastest of them (``fastest``, a running minimum from the end; R / T rather than
    R * (1 / T), so the floats are the definition's).
    """

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
