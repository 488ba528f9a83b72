"""Candidates for state operations: initialization, restore, intermediate snapshots,
terminal retirement, and the vision work that encodes a request's window of images (a
prerequisite too)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios.decide.prerequisites import (
    PairChoice,
    PairShape,
    PinnedRow,
    TerminalContribution,
    best_pair_cohort,
    sequence_score,
)
from ignition.helios.decide.state_rows import (
    ROLES,
    _decoder_value,
    _ms,
    _prompt_value,
    _state_lane,
    following_rows,
)
from ignition.helios.decide.state_tables import StateTables
from ignition.helios.decide.tails import sequence_rate, stranded_tail
from ignition.helios.decide.terminal import TerminalView
from ignition.helios.decide.utility import LanePick, LaneView

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
    """The pair choice for each row that could be the mixed graph's enabled prompt."""
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
