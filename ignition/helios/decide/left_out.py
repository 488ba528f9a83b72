"""Decoders a prompt frame leaves out: the generation frame they then need."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios.decide.tails import FastestAtLeast
from ignition.helios.decide.utility import Candidate, Decision, prompt_capacity
from ignition.helios.state.cost import CostModel

GENERATION_KINDS = (GraphKind.DECODE, GraphKind.SPECULATIVE)


class CarryTimes:
    """Per catalog and cost version: how many decoders a mixed program holding a chunk
    can carry beside it, and the fastest measured generation program per batch size."""

    def __init__(self, descriptors: Sequence[Descriptor], costs: CostModel) -> None:
        mixed = sorted(
            (prompt_capacity(d), d.batch_capacity - 1)
            for d in descriptors
            if d.kind is GraphKind.MIXED and prompt_capacity(d) > 0
        )
        # issue 39: (capacity, lanes, batch) of every mixed program
        self._mixed = [
            (prompt_capacity(d), d.prompt_lanes, d.batch_capacity)
            for d in descriptors
            if d.kind is GraphKind.MIXED and prompt_capacity(d) > 0
        ]
        # carry[i]: the most decoders any mixed program of capacity >= chunks[i] carries
        self.chunks = [c for c, _ in mixed]
        self.carry = [0] * len(mixed)
        most = 0
        for i in range(len(mixed) - 1, -1, -1):
            most = max(most, mixed[i][1])
            self.carry[i] = most
        self._generation = FastestAtLeast(
            (d.batch_capacity, costs.estimate_ns(d) / 1e6)
            for d in descriptors
            if d.kind in GENERATION_KINDS and costs.estimate_ns(d) > 0
        )

    def carried(self, chunk_tokens: int, prompts: int = 1) -> int:
        """The most decoders a prepared mixed program whose bucket holds ``chunk_tokens``
        carries beside as many of the frame's ``prompts`` as it has lanes for (a frame of
        several prompts, a multi-lane prefill's say, is compared with the mixed frame
        that would have carried decoders beside its prompt work)."""
        if prompts > 1:
            return max(
                (b - min(prompts, lanes) for c, lanes, b in self._mixed if c >= chunk_tokens),
                default=0,
            )
        i = bisect.bisect_left(self.chunks, chunk_tokens)
        return self.carry[i] if i < len(self.chunks) else 0

    @property
    def largest_generation(self) -> int:
        """The largest batch capacity of a measured generation program (0: none)."""
        capacities = self._generation.capacities
        return capacities[-1] if capacities else 0

    def generation_ms(self, decoders: int) -> float | None:
        """The fastest measured generation program serving ``decoders`` in one frame."""
        return self._generation.ms_for(decoders)


def carry_times(descriptors: Sequence[Descriptor], costs: CostModel) -> CarryTimes:
    """Memoised on the catalog object and the estimates' version."""
    key = (id(descriptors), costs.estimates_version)
    cached = costs.derived.get("left_out")
    if cached is not None and cached[0] == key and cached[1][0] is descriptors:
        return cached[1][1]
    times = CarryTimes(descriptors, costs)
    costs.derived["left_out"] = (key, (descriptors, times))
    return times


def left_out_score(
    candidate: Candidate,
    chunk_tokens: int,
    served: int,
    order: Sequence[tuple[int, int, float]],
    times: CarryTimes,
    decision: Decision,
    prompts: int = 1,
) -> float:
    """``candidate``'s score, lowered to the sequence's that then serves the decoders it
    leaves out."""
    if candidate.is_indeterminate or not decision.left_out:
        return candidate.score
    left = min(len(order), times.carried(chunk_tokens, prompts)) - served
    if left <= 0:
        return candidate.score
    return _sequence_score(candidate, order, served, left, times, decision)


def generation_left_out_score(
    candidate: Candidate,
    served: int,
    order: Sequence[tuple[int, int, float]],
    times: CarryTimes,
    decision: Decision,
) -> float:
    """Issue 40 (``PolicyConfig.generation_left_out``): the same sequence for a
    generation frame serving ``served`` of the ready decoders where a measured
    generation program could have carried ``min(R, largest)``: the E left out then need
    the fastest measured program holding E."""
    if candidate.is_indeterminate or not decision.generation_left_out:
        return candidate.score
    left = min(len(order), times.largest_generation) - served
    if left <= 0:
        return candidate.score
    return _sequence_score(candidate, order, served, left, times, decision)


def _sequence_score(
    candidate: Candidate,
    order: Sequence[tuple[int, int, float]],
    served: int,
    left: int,
    times: CarryTimes,
    decision: Decision,
) -> float:
    """The candidate's score or, when lower, the value per time of the candidate followed
    by the fastest measured generation frame holding the ``left`` decoders it leaves out."""
    f_ms = times.generation_ms(left)
    if f_ms is None:
        return candidate.score
    value = sum(max(0.0, v) for _, _, v in order[served : served + left])
    total_ms = candidate.duration_ms + f_ms
    sequence = (candidate.total_value + value) / total_ms - decision.waiting_cost(total_ms)
    return min(candidate.score, sequence)
