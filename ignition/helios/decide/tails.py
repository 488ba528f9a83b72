"""Prompt tails: a chunk that stops short of a remainder one prepared graph could finish."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ignition.components.descriptor import Descriptor
from ignition.helios.decide.utility import (
    Candidate,
    Decision,
    LanePick,
    LaneView,
    consumable_tokens,
    prompt_capacity,
)
from ignition.helios.state.cost import CostModel


class FastestAtLeast:
    """Over (capacity, ms) pairs: the least ms among entries of capacity at least x (the
    fastest graph able to hold x), looked up by bisection. None above every capacity."""

    def __init__(self, measured: Iterable[tuple[int, float]]) -> None:
        measured = sorted(measured)
        self.capacities = [c for c, _ in measured]
        self.fastest = [0.0] * len(measured)
        best = float("inf")
        for i in range(len(measured) - 1, -1, -1):
            best = min(best, measured[i][1])
            self.fastest[i] = best

    def ms_for(self, capacity: int) -> float | None:
        i = bisect.bisect_left(self.capacities, capacity)
        return self.fastest[i] if i < len(self.capacities) else None


class CompletionTimes:
    """The fastest measured prompt graph per needed capacity, and the largest prepared
    prompt capacity (measured or not: what one graph could consume now)."""

    def __init__(self, descriptors: Sequence[Descriptor], costs: CostModel) -> None:
        measured = []
        self.largest = 0
        for d in descriptors:
            capacity = prompt_capacity(d)
            if capacity <= 0:
                continue
            self.largest = max(self.largest, capacity)
            estimate = costs.estimate_ns(d)
            if estimate > 0:
                measured.append((capacity, estimate / 1e6))
        self._fastest = FastestAtLeast(measured)

    def ms_for(self, tokens: int) -> float | None:
        """The fastest measured graph consuming ``tokens`` prompt tokens in one row."""
        return self._fastest.ms_for(tokens)


def completion_times(descriptors: Sequence[Descriptor], costs: CostModel) -> CompletionTimes:
    """Memoised on the catalog object and the estimates' version."""
    key = (id(descriptors), costs.estimates_version)
    cached = costs.derived.get("tail_completion")
    if cached is not None and cached[0] == key and cached[1][0] is descriptors:
        return cached[1][1]
    times = CompletionTimes(descriptors, costs)
    costs.derived["tail_completion"] = (key, (descriptors, times))
    return times


@dataclass(frozen=True)
class StrandedTail:
    """What finishing a stranded tail earns (its tokens, the output token, delivery) and
    the fastest measured graph able to consume it whole."""

    value: float
    ms: float


def stranded_tail(view: LaneView, chunk_tokens: int, times: CompletionTimes) -> StrandedTail | None:
    """The tail a ``chunk_tokens`` chunk of ``view``'s one row leaves, when nothing forces
    the stop (no span or cut) and a prepared graph could have consumed the remainder now."""
    remaining = view.remaining_prompt
    if remaining > times.largest or consumable_tokens(view, remaining) < remaining:
        return None  # no graph holds it all, or a span or cut stops it anyway
    tail = remaining - chunk_tokens
    f_ms = times.ms_for(tail)
    if tail <= 0 or f_ms is None:
        return None
    value = view.prices.prefill_token * tail + view.prices.output_token + view.prices.delivery
    return StrandedTail(value, f_ms)


def sequence_rate(
    value: float, duration_ms: float, tail: StrandedTail, decision: Decision
) -> float:
    """The value rate of ``value`` earned over ``duration_ms`` followed by the tail's graph,
    less the common waiting cost over both."""
    total_ms = duration_ms + tail.ms
    return (value + tail.value) / total_ms - decision.waiting_cost(total_ms)


def stranded_tail_score(
    candidate: Candidate, pick: LanePick, times: CompletionTimes, decision: Decision
) -> float:
    """``candidate``'s score, lowered to the completing sequence's when its one prompt
    row ``pick`` strands a tail that a prepared graph could have consumed now."""
    if candidate.is_indeterminate or pick.expected_output > 0:
        return candidate.score
    tail = stranded_tail(pick.view, pick.num_prompt_tokens, times)
    if tail is None:
        return candidate.score
    sequence = sequence_rate(candidate.total_value, candidate.duration_ms, tail, decision)
    return min(candidate.score, sequence)
