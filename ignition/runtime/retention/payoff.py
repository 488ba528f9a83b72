"""Whether a restore or a capture saves more prefill time than it costs (docs/scheduling.md,
"Retention pays only where it saves prefill launches").

A restore replaces the prefill of the restored prefix by one state copy. On a large
MoE model a prefill launch is weight-bound: the H200 roofline prefills 130 tokens in
53.45 ms and 1536 in 53.79 ms, so restoring a 1087-token history in front of a
130-token turn saves 0.34 ms, about the restore's own 0.33 ms copy, while Helios then
values the turn at its 130 remaining tokens and serves it after the longer prompts
(its slot held idle meanwhile). Measured at saturation that made retention slower than
no retention. So retention work must pay:

- a restore of ``m`` of a prompt's ``n`` tokens is done only when the prefill time it
  saves, ``prefill(n) - prefill(n - m)``, minus the restore's estimate exceeds
  ``fraction`` of ``prefill(n)`` (``fraction`` is the checkpoint allowance's
  scheduler_checkpoint_extra_work_fraction: savings within that share of a prompt's
  prefill are within what retention may spend anyway, and below the scheduling cost
  measured for them);
- a capture of ``L`` tokens is taken only when restoring it into the predicted next
  prompt of ``N`` tokens would pay the same way after its own copy: ``prefill(N) -
  prefill(N - L)`` minus the restore and the snapshot estimates exceeds ``fraction`` of
  ``prefill(N)``. A conversation's next turn re-sends this prompt and its reply and
  adds one message, predicted as long as this prompt's latest message (with what
  follows it, the generation prompt): N = prompt + reply + latest message, the reply
  being the request's output limit for captures planned at admission and its actual
  output for the terminal capture. A prompt of one message (a conversation's first
  turn) says nothing of the next message's length: it is predicted by the median latest
  message of the last nine prompts of several messages, and with none yet the capture
  is kept. A prompt without message endpoints has no prediction, and the capture is
  kept.

``prefill(x)`` is the measured prefill graphs' cheapest cover of ``x`` tokens: whole
launches of the graph with the least time per token, the rest in the fastest graph that
holds it, or one graph holding all of ``x`` when that is faster. Unknown costs (no
measured prefill graph, no restore or snapshot estimate) keep every restore and capture,
as before: unknown durations compare optimistically.
"""

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
    """Whether restoring ``restored_tokens`` of the prompt saves more than it costs.

    ``copy_ns``: a capture's own snapshot, paid before the restore can be (capture_pays).
    """
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
    """What a conversation's next turn is predicted to add after this turn's reply. None
    without message endpoints."""
    ends = sorted({e for e in message_ends if 0 < e <= prompt_tokens})
    if not ends:
        return None
    earlier = [e for e in ends if e < ends[-1]]
    return LatestMessage(prompt_tokens - (earlier[-1] if earlier else 0), not earlier)


class NextMessages:
    """The latest-message lengths of recent prompts that hold more than one message: what
    a one-message prompt's next turn is predicted to add (its own length says nothing of
    the replies' followers). The median of the last nine, as for graph costs; none yet
    predicts nothing, and the capture is kept."""

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
    """Whether a checkpoint of ``checkpoint_tokens`` would pay for its copy when restored
    by a predicted next prompt of ``next_prompt`` tokens (None: no prediction, the
    capture is kept)."""
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
