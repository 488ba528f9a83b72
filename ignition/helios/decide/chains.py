"""Longer chains: a row that waits on more than one prerequisite stage (a restore or
init, then the vision work for its window, then inference)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios.decide.prerequisites import chain_score, continuation_contribution
from ignition.helios.decide.state_rows import _decoder_value, _ms, _prompt_value, following_rows
from ignition.helios.decide.state_tables import StateTables
from ignition.helios.decide.utility import LaneView


def chain_vision(tables: StateTables, view: LaneView) -> tuple[bool, float | None]:
    """A chained row's vision stage: whether some vision program holds its window, and
    the fastest such program's duration (None while one of them is unmeasured: the
    stage's duration is then unknown)."""
    vision = [g for g in tables.vision if view.chained_patches <= g.patch_capacity]
    known = [m for g in vision if (m := _ms(tables.costs, g)) is not None]
    return bool(vision), (min(known) if known and len(known) == len(vision) else None)


def future_delivery_ms(
    view: LaneView, tables: StateTables, t_ms: float | None, vision_ms: float | None
) -> float | None:
    """The reference interval sigma_i of a multistage-blocked decoder."""
    generation = tables.fastest_generation_ms
    if t_ms is None or vision_ms is None or generation is None:
        return view.sigma_ms
    return t_ms + vision_ms + generation


def chain_cohort(
    d: Descriptor, tables: StateTables, chained: Sequence[LaneView], t_ms: float | None
) -> tuple[float, list[LaneView], float, bool] | None:
    """The first stage of longer chains (restore, then vision, then inference)."""
    costs, decision = tables.costs, tables.decision
    contributions = []
    unknown = []  # whether a row's contribution rests on an unknown duration
    for v in chained:
        has_vision, v_ms = chain_vision(tables, v)
        own = v
        if v.is_decoder:
            own = replace(v, sigma_ms=future_delivery_ms(v, tables, t_ms, v_ms))
        best, best_unknown = 0.0, False
        for following in tables.inference if has_vision else ():
            f_ms = _ms(costs, following)
            rest = None if v_ms is None or f_ms is None else v_ms + f_ms
            if v.is_decoder:
                if following.kind not in (GraphKind.DECODE, GraphKind.SPECULATIVE):
                    continue
                span = (t_ms or 0.0) + (rest or 0.0)
                value = _decoder_value(own, decision, span, following_rows(following))
            elif following.kind in (GraphKind.PREFILL, GraphKind.MIXED):
                value = _prompt_value(v, following)[0]
            else:
                continue
            contribution = continuation_contribution(value, t_ms, rest)
            if contribution > best:
                best, best_unknown = contribution, rest is None
        contributions.append(best)
        unknown.append(best_unknown)
    order = sorted(range(len(chained)), key=lambda i: -contributions[i])[: d.batch_capacity]
    order = [i for i in order if contributions[i] > 0]
    if not order:
        return None
    values = [contributions[i] for i in order]
    score = chain_score(values, t_ms, decision.waiting_coefficient)
    known = t_ms is not None and not any(unknown[i] for i in order)
    return score, [chained[i] for i in order], sum(values), known
