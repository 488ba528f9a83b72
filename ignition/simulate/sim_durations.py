"""How long a simulated frame takes: the scenario's device model on a graph's
capacities and its lanes' activity, times a lognormal noise factor."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios import LaneRole, ScheduledPlan
from ignition.simulate.devices import DeviceError, execution_of
from ignition.simulate.scenario import Scenario, ScenarioError
from ignition.simulate.sim_state import NS_PER_MS

NOMINAL_CONTEXT_PER_ROW = 1024  # cached context per row when preseeding a graph's cost


def duration_ms(
    scenario: Scenario, d: Descriptor, tokens: int, rows: int, context: int, **detail: Any
) -> float:
    try:
        execution = execution_of(d, tokens, rows, context, **detail)
        return scenario.durations.duration_ms(execution)
    except DeviceError as err:
        raise ScenarioError(str(err)) from None


def nominal_ns(scenario: Scenario, d: Descriptor) -> int:
    """A full graph at a nominal cached context: what a build's tuning would measure."""
    rows = max(d.batch_capacity, d.row_capacity)  # or a prefill's prompt lanes
    tokens = d.packed_capacity + d.prefill_capacity
    if d.kind is GraphKind.PREFILL:
        prompt, decoders, per_row = tokens, 0, 0
    elif d.kind is GraphKind.MIXED:  # L prompt lanes, B - L decoders
        prompt, decoders = d.prefill_capacity, rows - d.prompt_lanes
        per_row = NOMINAL_CONTEXT_PER_ROW
    else:
        prompt, decoders, per_row = 0, rows, NOMINAL_CONTEXT_PER_ROW
    ms = duration_ms(
        scenario,
        d,
        tokens,
        rows,
        rows * per_row,
        prompt_tokens=prompt,
        draft_rows=decoders,
        row_contexts=(per_row,) * rows,
    )
    return max(1, round(ms * NS_PER_MS))


def sample_ns(
    scenario: Scenario, plan: ScheduledPlan, contexts: Sequence[int], rng: random.Random
) -> int:
    """The plan's duration on the device: its capacities, its lanes' activity
    (``contexts``: each lane's cached context)."""
    tokens, prompt, decoders = 0, 0, 0
    for lane in plan.lanes:
        if lane.role is LaneRole.PROMPT:
            tokens += lane.num_prompt_tokens
            prompt += lane.num_prompt_tokens
        else:
            tokens += lane.query_length
            decoders += 1
    ms = duration_ms(
        scenario,
        plan.descriptor,
        tokens,
        len(plan.lanes),
        sum(contexts),
        prompt_tokens=prompt,
        draft_rows=decoders,
        row_contexts=tuple(contexts),
    )
    noise = math.exp(rng.gauss(0.0, scenario.noise_sigma))
    return max(1, round(ms * NS_PER_MS * noise))
