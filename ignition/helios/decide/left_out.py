"""Decoders a prompt frame leaves out: the generation frame they then need.

The selection formula scores one frame by its value rate. A frame that carries a
prompt chunk and leaves ready decoders out is compared with the same chunk carrying
them, and on a weight-bound device the comparison is close: the chunk's value rate is
the frame's average, each decoder added earns its own token at its marginal time in
the frame, and the balanced newcomer price puts a new prompt's rate above that
marginal rate. So the frame that leaves the decoders out wins by a hair (measured on
the 4x H100 profile at concurrency 64: 4.85 against 4.62 value units per ms, 62
decoders left out of a 1,024-token mixed frame that would have carried them for 19.5
more ms), and the decoders then need a generation frame of their own, 33 ms for the
same tokens. Over the two frames the carrying frame is worth 4.8 per ms and the pair
3.7: the one-frame rate does not see the second frame, and the decoders' age price
(0.1 value / ms^2 against prompt values of ~130 per frame) is too small to make up
for it. The decoders were waiting behind prompt frames because of that, not because
of their price.

The rule (a bounded lookahead like the stranded-tail rule of ``tails.py``): a
candidate carrying one prompt row and serving n of the R ready decoders, where a
prepared mixed program holding its chunk could have carried H decoders beside it,
leaves E = min(R, H) - n decoders out. It is worth no more than the sequence it
starts: itself (duration T, value V), then the fastest measured generation program
of batch capacity at least E (F), which earns the E best left-out decoders' one-row
values V_E. Its score is min(plain, (V + V_E) / (T + F) - waiting over T + F), so it
only ever lowers a score: every upper bound of the bounded search stays true, and
decode-only frames, frames that carry every decoder a shape could, and catalogs
without mixed programs (where no frame can carry a decoder beside a prompt, and the
seed's "a smaller prefill can win near a throughput knee" is untouched) keep their
plain score. Rows of several prompts in a batched prefill program and unknown
durations are left as they are; a frame of k prompt lanes sharing one bucket (issue
39) counts the decoders a mixed program whose bucket holds its prompt tokens carries
beside min(k, its lanes) prompts.
Only the frame's own duration enters the plan. Measured in ``docs/scheduling.md``
("Decoders left out of prompt frames").
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios.decide.cost import CostModel
from ignition.helios.decide.tails import FastestAtLeast
from ignition.helios.decide.utility import Candidate, Decision, prompt_capacity

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
    leaves out. ``order`` is the decoder table's one-row order (best first), ``served``
    how many of those the candidate carries beside its ``chunk_tokens`` prompt tokens
    in ``prompts`` lanes."""
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
    the fastest measured program holding E. Only lowers the score."""
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
