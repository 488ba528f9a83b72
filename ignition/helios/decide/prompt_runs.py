"""A started prompt's chunks follow one another while no decoder's TBT target is at risk
(issue 40, item 2)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios.decide.chunk_target import ready_ages
from ignition.helios.decide.rounds import LaneTable
from ignition.helios.decide.utility import Decision, LanePick, LaneView, consumable_tokens
from ignition.helios.state.cost import CostModel


class PromptTable(Protocol):
    """What the rule reads of ``policy.PromptTable`` (which imports this module)."""

    views: list[LaneView]
    descriptors: Sequence[Descriptor]


@dataclass
class Run:
    """The lane capacities of the fitting mixed programs, and each row's run chunk."""

    capacities: tuple[int, ...]
    chunks: dict[int, int] = field(default_factory=dict)  # id(view) -> run chunk

    def chunk(self, view: LaneView) -> int:
        found = self.chunks.get(id(view))
        if found is None:
            found = max((consumable_tokens(view, c) for c in self.capacities), default=0)
            self.chunks[id(view)] = found
        return found

    def takes_run_chunk(self, prompts: Sequence[LanePick]) -> bool:
        return any(p.num_prompt_tokens >= self.chunk(p.view) for p in prompts)


def open_run(
    prompts: PromptTable, decoders: LaneTable, costs: CostModel, decision: Decision
) -> Run | None:
    """The open run of this decision, or None. Memoised on the decoder table (one prompt
    table per decoder table) per cost model and estimates version."""
    if not decision.prompt_runs or decision.tbt_target_ms <= 0:
        return None
    key = (id(costs), costs.estimates_version)
    found = decoders.__dict__.get("_open_run")
    if found is not None and found[0] == key:
        return found[1]
    run = _open_run(prompts, decoders, costs, decision.tbt_target_ms)
    decoders.__dict__["_open_run"] = (key, run)
    return run


def _open_run(
    prompts: PromptTable, decoders: LaneTable, costs: CostModel, tau: float
) -> Run | None:
    started = [v for v in prompts.views if v.prompt_position > 0 and v.remaining_prompt > 0]
    if not started:
        return None
    ready, oldest = ready_ages(decoders)
    if ready <= 0:
        return None  # nothing but prompt frames competes
    capacities = set()
    for d in prompts.descriptors:
        if d.kind is not GraphKind.MIXED or d.batch_capacity < ready + 1:
            continue
        t_ns = costs.estimate_ns(d)
        if t_ns > 0 and oldest + t_ns / 1e6 <= tau:
            capacities.add(d.prefill_capacity if d.prompt_lanes == 1 else d.lane_capacity)
    run = Run(tuple(sorted(capacities)))
    return run if any(run.chunk(v) > 0 for v in started) else None
