"""Candidates for state operations: initialization, restore, intermediate snapshots,
terminal retirement, and the vision work that encodes a request's window of images (a
prerequisite too).

An initialization (a fresh request's zero state, when an init program is prepared: a
restore from nothing), a restore (a retained checkpoint matching a new request's
prefix) and an intermediate snapshot (a checkpoint capture where prefill was cut) are
prerequisites: they earn no
token service themselves and are ranked by what they enable. For every pair of a
prepared state-operation shape and a following inference shape, the two cohorts are
chosen jointly with the exact prefix-sum calculation of prerequisites.py, and the
candidate carries the pair's score; the plan keeps only the state operation's own
duration, and only it executes before replanning.

Terminal retirement competes through the same value-per-time score: each retiring
row is worth terminal_value + terminal_age_price * sigma * (A + T), sigma being the
snapshot family's batch-feasible reference interval (none without a measured
snapshot cost: nothing is invented). A snapshot graph with spare rows can retire
terminal requests alongside a capture, and a terminal row's age stops at the
snapshot's completion, which saves the waiting it would otherwise incur over the
following graph.

Following-graph lane values use the ordinary lane arithmetic at the lookahead's end
(ages reset at the following graph's completion). When the following graph's one prompt
row stops short of a remainder one prepared graph could consume whole (tails.py), the
pair is worth no more than the sequence that also finishes the tail: min(pair, sequence
over T + F + tail), so the bound only lowers scores. Decoders are valued at the
following graph's real width (following_rows: min(D + 1, W) within an even share of its
row budget, and the request's own limits), with their expected output at that width.

Longer chains (restore or init, then vision, then inference) are chains.py's: each row
ranked by its individual continuation index, a blocked decoder aged by its individual
future-delivery reference.

This module values pairs; state_choice.py values every pair of every state shape, and
fast/state_search.py only those that could win (best upper bound first,
fast/pair_bounds.py, skipping what falls clearly below the incumbent).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios.config import PolicyConfig
from ignition.helios.decide.cost import CostModel
from ignition.helios.decide.policy import Population
from ignition.helios.decide.prerequisites import (
    PairChoice,
    PairShape,
    PinnedRow,
    TerminalContribution,
    best_pair_cohort,
    sequence_score,
)
from ignition.helios.decide.speculation import expected_output
from ignition.helios.decide.tails import CompletionTimes, sequence_rate, stranded_tail
from ignition.helios.decide.terminal import (
    TerminalPrices,
    TerminalView,
    saved_waiting,
    terminal_lane_value,
)
from ignition.helios.decide.utility import (
    Decision,
    LanePick,
    LaneView,
    consumable_tokens,
    decode_lane,
    prompt_capacity,
)
from ignition.helios.types import LaneRole

STATE_KINDS = (GraphKind.INIT, GraphKind.RESTORE, GraphKind.SNAPSHOT, GraphKind.VISION)
ROLES = {
    GraphKind.INIT: LaneRole.INIT,
    GraphKind.RESTORE: LaneRole.RESTORE,
    GraphKind.SNAPSHOT: LaneRole.SNAPSHOT,
    GraphKind.VISION: LaneRole.VISION,
}


def _ms(costs: CostModel, d: Descriptor) -> float | None:
    estimate = costs.estimate_ns(d)
    return estimate / 1e6 if estimate > 0 else None


def terminal_sigma_ms(
    snapshots: Sequence[Descriptor], costs: CostModel, num_terminal: int
) -> float | None:
    """K * T / min(B, K) for the measured snapshot shape minimizing T / min(B, K)."""
    if num_terminal < 1:
        return None
    best = None
    for d in snapshots:
        t = _ms(costs, d)
        if t is not None:
            per = t / min(d.batch_capacity, num_terminal)
            best = per if best is None else min(best, per)
    return None if best is None else num_terminal * best


def _enabled_kind(view: LaneView) -> GraphKind:
    """Vision-pending views carry their patches; restore-pending ones sit at the restored
    position, capture-pending ones at the capture end, init-pending ones at position zero
    (a capture never ends there, a restore never restores nothing; see projection)."""
    if view.vision_patches:
        return GraphKind.VISION
    if view.prompt_position in view.capture_ends:
        return GraphKind.SNAPSHOT
    return GraphKind.RESTORE if view.prompt_position > 0 else GraphKind.INIT


def _enables(view: LaneView, d: Descriptor) -> bool:
    """Whether ``d`` performs the prerequisite ``view`` waits for (a vision program must
    hold the window's largest image)."""
    if _enabled_kind(view) is not d.kind:
        return False
    return d.kind is not GraphKind.VISION or view.vision_patches <= d.patch_capacity


def _prompt_value(view: LaneView, d: Descriptor) -> tuple[float, int]:
    tokens = consumable_tokens(view, prompt_capacity(d))
    value = view.prices.prefill_token * tokens
    if tokens > 0 and tokens >= view.remaining_prompt:
        value += view.prices.output_token + view.prices.delivery
    return value, tokens


def following_rows(d: Descriptor) -> int:
    """Rows a decoder can verify in following graph ``d`` whichever cohort it joins:
    min(D + 1, W), and no more than an even share P // B of the row budget, which every
    cohort of at most B lanes can give each lane (exact for rectangular programs, a lower
    bound for ragged ones)."""
    if not d.speculation_enabled:
        return 1
    share = d.packed_capacity // d.batch_capacity
    return max(1, min(d.verify_rows, share))


def decoder_rows(view: LaneView, rows: int) -> int:
    """``rows`` bounded by the request's own limits (output, context, drafts)."""
    return max(1, min(rows, view.remaining_output, view.remaining_context, view.max_rows))


def _decoder_value(view: LaneView, decision: Decision, total_ms: float, rows: int = 1) -> float:
    """A decoder's following-graph value at ``rows`` verified rows (following_rows)."""
    if view.remaining_output < 1:
        return 0.0
    q = decoder_rows(view, rows)
    output = expected_output(view.survivals, q, decision.alpha)
    return decode_lane(view, decision, total_ms, q, output, q).value


class _Shapes:
    """What the pair lookahead needs of the inference shapes alone: each one's duration
    in ms (None: unknown), the rows a decoder verifies in it (following_rows) and the
    tail rule's completion times, built on first use. The shapes are held, so the ids a
    memo key records stay theirs."""

    def __init__(self, inference: Sequence[Descriptor], costs: CostModel) -> None:
        self.inference = list(inference)
        self.ms = [_ms(costs, d) for d in self.inference]
        self.widths = [following_rows(d) for d in self.inference]  # static per shape
        self._costs = costs
        self._completion: CompletionTimes | None = None

    @property
    def completion(self) -> CompletionTimes:
        if self._completion is None:
            self._completion = CompletionTimes(self.inference, self._costs)
        return self._completion


class StateTables:
    """The lane contributions one decision needs, per following shape."""

    def __init__(
        self,
        population: Population,
        inference: Sequence[Descriptor],
        snapshots: Sequence[Descriptor],
        costs: CostModel,
        decision: Decision,
        policy: PolicyConfig,
    ) -> None:
        self.population = population
        self.inference = list(inference)
        self.vision: list[Descriptor] = []  # the vision stages a chain may pass through
        self.costs = costs
        self.decision = decision
        scale = math.exp(decision.log_scale)
        self.prices = TerminalPrices(policy.terminal_value * scale, decision.terminal_age_price)
        self.sigma = terminal_sigma_ms(snapshots, costs, len(population.terminal))
        self.max_rows = max((d.batch_capacity for d in self.inference), default=1)
        self._shapes: _Shapes | None = None

    @property
    def shapes(self) -> _Shapes:
        """The inference shapes' durations and completion times, memoised on the shapes
        and the estimates' version in a slot of their own (tails.completion_times' one
        slot belongs to the selector's list)."""
        if self._shapes is None:
            key = (tuple(map(id, self.inference)), self.costs.estimates_version)
            cached = self.costs.derived.get("state_shapes")
            if cached is not None and cached[0] == key:
                self._shapes = cached[1]
            else:
                self._shapes = _Shapes(self.inference, self.costs)
                self.costs.derived["state_shapes"] = (key, self._shapes)
        return self._shapes

    @property
    def completion(self) -> CompletionTimes:
        return self.shapes.completion

    @property
    def fastest_generation_ms(self) -> float | None:
        """The fastest measured decode or speculative shape's duration (None: none is
        measured): the last stage of a blocked decoder's fastest way to a delivery."""
        durations = self.shapes.ms
        found = [
            m
            for d, m in zip(self.inference, durations, strict=True)
            if m is not None and d.kind in (GraphKind.DECODE, GraphKind.SPECULATIVE)
        ]
        return min(found, default=None)

    def terminal_contributions(
        self, rows: Sequence[TerminalView], t_ms: float | None, total_ms: float | None
    ) -> list[TerminalContribution]:
        out = []
        for row in rows:
            prefix = terminal_lane_value(self.prices, self.sigma, row.age_ms, t_ms or 0.0)
            saved = 0.0
            if t_ms is not None and total_ms is not None:
                saved = saved_waiting(self.prices.age_price, t_ms, total_ms)
            out.append(TerminalContribution(prefix, prefix + saved))
        return out


@dataclass(frozen=True)
class PairCase:
    """One way the following graph can take its rows: the enabled and already-ready
    contributions with their views, and the mixed graph's pinned prompt row (its view in
    ``prompt``), if any."""

    values: list[float]
    ready: list[float]
    pin: PinnedRow | None
    views: list[LaneView]
    ready_views: list[LaneView]
    prompt: LaneView | None = None
    # the mixed graph's prompt enabled by the prerequisite: one (value, view) per row that
    # could be it; the decoder cohort beside it is the same for each (see _enabled_prompts)
    enabled_prompts: list[tuple[float, LaneView]] | None = None


def _pair_inputs(
    tables: StateTables,
    enabled: Sequence[LaneView],
    following: Descriptor,
    total_ms: float,
) -> list[PairCase]:
    decision = tables.decision
    ready_prompts = list(tables.population.prompts)
    ready_decoders = [v for v in tables.population.decoders if v.remaining_output >= 1]
    prompt_rows = [v for v in enabled if not v.is_decoder]
    decode_rows = [v for v in enabled if v.is_decoder]
    cases = []
    if following.kind is GraphKind.PREFILL:
        values = [_prompt_value(v, following)[0] for v in prompt_rows]
        ready = [_prompt_value(v, following)[0] for v in ready_prompts]
        cases.append(PairCase(values, ready, None, prompt_rows, ready_prompts))
    elif following.kind in (GraphKind.DECODE, GraphKind.SPECULATIVE):
        if not decode_rows:
            return []  # the pair needs a newly ready row
        rows = following_rows(following)
        values = [_decoder_value(v, decision, total_ms, rows) for v in decode_rows]
        ready = [_decoder_value(v, decision, total_ms, rows) for v in ready_decoders]
        cases.append(PairCase(values, ready, None, decode_rows, ready_decoders))
    elif following.kind is GraphKind.MIXED:
        rows = following_rows(following)
        dec_values = [_decoder_value(v, decision, total_ms, rows) for v in decode_rows]
        ready = [_decoder_value(v, decision, total_ms, rows) for v in ready_decoders]
        cases.append(PairCase(dec_values, ready, None, decode_rows, ready_decoders))  # absent
        ready_values = [_prompt_value(v, following)[0] for v in ready_prompts]
        if ready_values:  # prompt already ready: the best one
            best = max(range(len(ready_values)), key=ready_values.__getitem__)
            pin = PinnedRow(ready_values[best], enabled=False)
            cases.append(
                PairCase(dec_values, ready, pin, decode_rows, ready_decoders, ready_prompts[best])
            )
        if prompt_rows:  # prompt enabled by the prerequisite, newly enabled decoders beside
            prompts = [(_prompt_value(v, following)[0], v) for v in prompt_rows]
            pin = PinnedRow(0.0, enabled=True)
            cases.append(
                PairCase(dec_values, ready, pin, decode_rows, ready_decoders, None, prompts)
            )
    return cases


def _enabled_prompts(
    case: PairCase, shape: PairShape, contributions: Sequence[TerminalContribution], waiting: float
) -> list[tuple[PairChoice, LaneView]]:
    """The pair choice for each row that could be the mixed graph's enabled prompt.

    The cohort beside the pinned prompt (newly enabled and ready decoders, the
    prerequisite's terminal rows) does not depend on the prompt's value unless terminal
    rows take part (the prefix comparison then may), so one cohort serves every row:
    value = prompt + cohort, scored as best_pair_cohort scores it."""
    assert case.enabled_prompts is not None
    base = best_pair_cohort(shape, case.values, case.ready, contributions, waiting, case.pin)
    if base is None:
        return []
    if base.terminal:
        out = []
        for value, v in case.enabled_prompts:
            pin = PinnedRow(value, enabled=True)
            choice = best_pair_cohort(shape, case.values, case.ready, contributions, waiting, pin)
            if choice is not None:
                out.append((choice, v))
        return out
    out = []
    for value, v in case.enabled_prompts:
        total = value + base.sequence_value
        score = sequence_score(shape, total, base.prefix_value, False, waiting)
        out.append((replace(base, sequence_value=total, score=score), v))
    return out


def _one_prompt_row(case: PairCase, choice: PairChoice, following: Descriptor) -> LaneView | None:
    """The following graph's prompt row when it serves exactly one (the tail rule leaves
    rows of several prompts as they are)."""
    if case.pin is not None:
        return case.prompt
    if following.kind is not GraphKind.PREFILL or len(choice.enabled) + len(choice.ready) != 1:
        return None
    return case.views[choice.enabled[0]] if choice.enabled else case.ready_views[choice.ready[0]]


def _tail_bounded(
    choice: PairChoice,
    shape: PairShape,
    row: LaneView | None,
    following: Descriptor,
    tables: StateTables,
) -> float:
    """The pair's score, lowered to the sequence that also finishes the tail its one
    prompt row strands (tails.py); the productive first-stage prefix is untouched."""
    if row is None or not shape.is_known:
        return choice.score  # unknown durations compare optimistically by value
    tail = stranded_tail(row, _prompt_value(row, following)[1], tables.completion)
    if tail is None:
        return choice.score
    t_ms, f_ms = shape.prerequisite_ms, shape.following_ms
    assert t_ms is not None and f_ms is not None
    decision = tables.decision
    bound = sequence_rate(choice.sequence_value, t_ms + f_ms, tail, decision)
    if choice.terminal:  # the prefix (terminal rows alone over T) stays as compared
        bound = max(bound, choice.prefix_value / t_ms - decision.waiting_cost(t_ms))
    return min(choice.score, bound)


def _state_lane(view: LaneView, role: LaneRole) -> LanePick:
    return LanePick(view=view, role=role, query_length=0, value=0.0)


class Offers(Protocol):
    """What a pair's cases are offered to (state_search keeps the best of them)."""

    def consider(
        self,
        position: tuple,
        score: float,
        lanes: list[LanePick],
        retire: list[TerminalView],
        value: float,
        known: bool,
    ) -> None: ...


def _pair(
    d: Descriptor,
    tables: StateTables,
    position: int,
    following: Descriptor,
    enabled: Sequence[LaneView],
    terminal: Sequence[TerminalView],
    t_ms: float | None,
    best: Offers,
) -> None:
    """Every case of the pair (``d``, ``following``) offered to ``best``."""
    costs, decision = tables.costs, tables.decision
    role = ROLES[d.kind]
    f_ms = _ms(costs, following)
    total_ms = (t_ms or 0.0) + (f_ms or 0.0)
    shape = PairShape(d.batch_capacity, following.batch_capacity, t_ms, f_ms)
    contributions = tables.terminal_contributions(
        terminal, t_ms, None if f_ms is None else total_ms
    )
    for c, case in enumerate(_pair_inputs(tables, enabled, following, total_ms)):
        if case.enabled_prompts is not None:
            waiting = decision.waiting_coefficient
            for i, (choice, v) in enumerate(_enabled_prompts(case, shape, contributions, waiting)):
                retire = [terminal[j] for j in choice.terminal]
                score = _tail_bounded(choice, shape, v, following, tables)
                lanes = [_state_lane(v, role)]
                lanes += [_state_lane(case.views[j], role) for j in choice.prerequisite_rows]
                best.consider(
                    (position, c, i), score, lanes, retire, choice.sequence_value, shape.is_known
                )
            continue
        pin, views = case.pin, case.views
        if pin is None and not case.values:
            continue
        choice = best_pair_cohort(
            shape, case.values, case.ready, contributions, decision.waiting_coefficient, pin
        )
        if choice is None:
            continue
        lanes = [_state_lane(views[i], role) for i in choice.prerequisite_rows]
        retire = [terminal[i] for i in choice.terminal]
        row = _one_prompt_row(case, choice, following)
        score = _tail_bounded(choice, shape, row, following, tables)
        best.consider((position, c), score, lanes, retire, choice.sequence_value, shape.is_known)


def _terminal_pick(row: TerminalView) -> LanePick:
    view = LaneView(
        handle=row.handle,  # type: ignore[arg-type]
        epoch=row.epoch,
        is_decoder=True,
        prompt_position=0,
        num_prompt_tokens=0,
        remaining_output=0,
        remaining_context=0,
        prices=None,  # type: ignore[arg-type]
        age_ms=row.age_ms,
        last_served_seq=row.last_served_seq,
    )
    return LanePick(view=view, role=LaneRole.TERMINAL, query_length=0, value=0.0)
