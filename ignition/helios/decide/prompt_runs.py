"""A started prompt's chunks follow one another while no decoder's TBT target is at risk
(issue 40, item 2).

Under the seed's cadence preference, between a long prompt's chunks Helios serves the
decoders' generation frames: a generation frame of 30 decoders earns about what a mixed
frame carrying them and a 1,536-token chunk earns per ms, and the age price favours
the shorter frame, so a 6,900-token prompt spent 1.6 s in chunks with six or seven
generation frames between each pair (``docs/scheduling.md``, "A started prompt's
chunks follow one another"). Yet a mixed frame carries every ready decoder too, so while
the TBT target (``chunk_target.py``) holds, the decoders lose nothing they were
promised by a chunk running now rather than later, and the prompt's first token comes
sooner.

**Rule** (``PolicyConfig.prompt_runs``, with ``tbt_target_ms`` = tau > 0). A measured
mixed program *fits* when it could carry a prompt chunk beside every one of the R ready
decoders within the target:

    batch_capacity >= R + 1  and  max_i A_i + T <= tau

(A_i the ready decoders' ages at the frame's projected start, T its measured duration:
``chunk_target.within_target`` with no decoder left out). A prompt row's *run chunk* is
the most of it a fitting program's lane takes (``utility.consumable_tokens``). A prompt
row is *started* when some of its prompt is consumed and some is left; a *run is open*
while a started row has a run chunk. While a run is open, every determinate candidate

- carrying no prompt (a decode or speculative frame, a mixed program's decode-only
  cohort) scores minus infinity, and so does
- one carrying prompt rows of which none takes its run chunk (a prompt frame taking
  a smaller chunk than one that fits),

so the winner is a prompt frame taking a whole run chunk; which prompt and which
decoders ride along stay the selection's (value per time under the target rule). Both
are needed: the seed's value prices a prompt token at about 1/400 of a decoder's output
token, so once generation frames are out, the value rate picks the smallest chunk
(64 tokens in a 54 ms frame, against 1,536 in 65 ms). A candidate passes: the fitting
program of the largest lane capacity carries its best row's run chunk (consumable
tokens grow with the capacity). When nothing fits (the decoders aged past tau - T),
every frame competes as before, and the run resumes once the decoders are served.
Unknown durations (discovery) and batched one-lane prefills are left alone. The rule
only lowers scores, so every bound of the bounded search stays true.
"""

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
