"""The acceptance-probe search plan() runs: ``decide.learning.choose_probe``'s probe,
found by skipping every shape whose optimistic gain bound (``probe_core.ProbeBound``,
numpy over every ceiling at once) falls clearly below the best gain found so far, with
the optimistic decoder table sharing the ordinary one's arrays."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ignition.components.descriptor import Descriptor
from ignition.helios.config import SpeculationMode
from ignition.helios.decide.learning import (
    HistoryOf,
    Probe,
    added_prefix_weights,
    ordinary_depths,
    ranks_before,
)
from ignition.helios.decide.policy import Population, candidates_for
from ignition.helios.decide.utility import Candidate, Decision
from ignition.helios.fast.lane_table import LaneTable
from ignition.helios.fast.probe_core import ProbeBound
from ignition.helios.fast.tables import Tables
from ignition.helios.state.cost import CostModel, Freshness

PROBE_MARGIN = 1e-6


def choose_probe(
    winner: Candidate,
    shapes: Sequence[tuple[Descriptor, bool]],
    population: Population,
    ordinary: Tables,
    costs: CostModel,
    decision: Decision,
    now_ns: int,
    mode: SpeculationMode,
    max_depth: int,
    history_of: HistoryOf,
    any_probe: bool = False,
) -> Probe | None:
    """The best acceptance probe against the ordinary ``winner``, or None; with
    ``any_probe``, the first one found (a caller that only needs to know whether one
    exists: a probe cannot join a queued frame, so plan() then waits either way)."""
    if mode is SpeculationMode.FIXED or winner.is_indeterminate or max_depth == 0:
        return None
    shapes = [(d, only) for d, only in shapes if d.speculation_enabled and d.proposal_depth > 0]
    if not shapes or not population.decoders:
        return None
    max_batch = max(d.batch_capacity for d, _ in shapes)
    alpha = decision.alpha
    histories = [history_of(v.handle) for v in population.decoders]
    optimistic = [history.optimistic_outputs(max_depth, alpha) for history in histories]
    outputs = np.array(optimistic, dtype=np.float64)
    bound = ProbeBound(
        population.decoders,
        ordinary.decoders.fixed,
        outputs,
        population.prompts,
        decision,
        max_depth,
        max_batch,
        [d.verify_rows for d, _ in shapes],
    )
    # (gain bound, position, shape): no probe of a shape gains more than its bound
    bounded = []
    for position, (d, decode_only) in enumerate(shapes):
        if costs.freshness(d, now_ns) is not Freshness.FRESH:
            continue
        t_ms = costs.estimate_ns(d) / 1e6
        found = bound.bound(d, t_ms, winner.score)
        if found is not None:
            bounded.append(((found - winner.score) / t_ms, position, (d, decode_only)))
    if not bounded:
        return None  # the common case while credit waits for a useful probe
    survivals = [history.optimistic_survivals(max_depth) for history in histories]
    arrays = ordinary.decoders.arrays.with_outputs(outputs)
    decoders = LaneTable(
        population.decoders,
        decision,
        max_depth,
        survivals,
        optimistic,
        arrays,
        ordinary.decoders.fixed,
    )
    tables = Tables(ordinary.prompts, decoders)
    depths = ordinary_depths(winner)
    bounded.sort(key=lambda item: -item[0])
    found_probes: dict[int, list[Probe]] = {}
    top_gain = -math.inf
    for gain_bound, position, (d, decode_only) in bounded:
        if gain_bound < top_gain - PROBE_MARGIN * max(1.0, abs(top_gain), abs(gain_bound)):
            break
        probes = found_probes[position] = []
        for c in candidates_for(d, tables, costs, decision, now_ns, mode, decode_only):
            if c.score <= winner.score:
                continue
            weights = added_prefix_weights(c, depths, history_of)
            if not weights:
                continue
            probes.append(Probe(c, (c.score - winner.score) / c.duration_ms, min(weights)))
            if any_probe:
                return probes[-1]
            top_gain = max(top_gain, probes[-1].gain)
    best: Probe | None = None
    for position in sorted(found_probes):
        for probe in found_probes[position]:
            if best is None or ranks_before(probe, best):
                best = probe
    return best
