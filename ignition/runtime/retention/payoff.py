"""Whether a restore or a capture saves more prefill time than it costs."""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PrefillEstimate:
    """Measured prefill graphs as (token capacity, estimated ns), by capacity."""

    graphs: tuple[tuple[int, float], ...]

    @classmethod
    def of(cls, graphs: Iterable[tuple[int, float]]) -> PrefillEstimate | None:
        known = tuple(sorted((c, ns) for c, ns in graphs if c > 0 and ns > 0))
        return cls(known) if known else None

    def ns(self, tokens: int) -> float:
        """The cheapest cover of ``tokens`` prompt tokens by measured prefill launches."""
        if tokens <= 0:
            return 0.0
        capacity, launch = min(self.graphs, key=lambda g: (g[1] / g[0], -g[0]))
        whole, rest = divmod(tokens, capacity)
        tail = min((ns for c, ns in self.graphs if c >= rest), default=launch) if rest else 0.0
        chunked = whole * launch + tail
        single = min((ns for c, ns in self.graphs if c >= tokens), default=chunked)
        return min(chunked, single)


def restore_pays(
    prefill: PrefillEstimate | None,
    prompt_tokens: int,
    restored_tokens: int,
    restore_ns: float | None,
    fraction: float,
    copy_ns: float = 0.0,
) -> bool:
    """Whether restoring ``restored_tokens`` of the prompt saves more than it costs."""
    if prefill is None or restore_ns is None:
        return True
    whole = prefill.ns(prompt_tokens)
    saved = whole - prefill.ns(prompt_tokens - restored_tokens)
    return saved - restore_ns - copy_ns > fraction * whole


@dataclass(frozen=True)
class LatestMessage:
    tokens: int  # the latest message's length with what follows it (the generation prompt)
    is_only: bool  # no earlier message: the prompt is one message


def latest_message(message_ends: Sequence[int], prompt_tokens: int) -> LatestMessage | None:
    """What a conversation's next turn is predicted to add (None: no message endpoints)."""
    ends = sorted({e for e in message_ends if 0 < e <= prompt_tokens})
    if not ends:
        return None
    earlier = [e for e in ends if e < ends[-1]]
    return LatestMessage(prompt_tokens - (earlier[-1] if earlier else 0), not earlier)


class NextMessages:
    """The latest-message lengths of recent multi-message prompts: what a next turn adds."""

    def __init__(self, window: int = 9) -> None:
        self._recent: deque[int] = deque(maxlen=window)

    def observe(self, tokens: int) -> None:
        self._recent.append(tokens)

    def predict(self) -> int | None:
        return round(statistics.median(self._recent)) if self._recent else None


def capture_pays(
    prefill: PrefillEstimate | None,
    checkpoint_tokens: int,
    next_prompt: int | None,
    snapshot_ns: float | None,
    restore_ns: float | None,
    fraction: float,
) -> bool:
    """Whether a checkpoint would pay for its copy when a predicted next prompt restores it."""
    if next_prompt is None or snapshot_ns is None:
        return True
    return restore_pays(
        prefill,
        max(next_prompt, checkpoint_tokens + 1),
        checkpoint_tokens,
        restore_ns,
        fraction,
        copy_ns=snapshot_ns,
    )
