"""What a simulated device sees of one execution (:class:`Execution`), and the
protocol every model follows; every policy in the room runs on the same model, so
comparisons measure scheduling, not timing assumptions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind


class DeviceError(ValueError):
    """A device model that cannot time an execution; the message names what is missing."""


@dataclass(frozen=True)
class Execution:
    """One graph execution as the device sees it.

    ``capacity_tokens`` / ``capacity_rows`` are the physical (padded) extents: for a
    prepared graph its packed + prefill capacity and batch capacity; for a baseline's
    eager batch the active counts. ``tokens`` / ``rows`` / ``context`` are the active
    packed tokens, active rows and summed cached context of those rows. ``draft_steps``
    is D, the MTP proposal steps the program runs.

    Optional detail the profiles of ``profiles.py`` use (older models ignore it):
    ``prompt_tokens`` of ``tokens`` are prompt chunks (the rest are decode or
    verification rows); ``draft_rows`` rows run the D draft steps (-1: every row);
    ``row_contexts`` is each active row's cached context, so attention reads can be
    bounded per row (empty: only the sum is known).
    """

    kind: GraphKind
    capacity_tokens: int
    capacity_rows: int
    tokens: int
    rows: int
    context: int
    draft_steps: int = 0
    descriptor: Descriptor | None = None
    prompt_tokens: int = 0
    draft_rows: int = -1
    row_contexts: tuple[int, ...] = ()


def execution_of(
    d: Descriptor,
    tokens: int,
    rows: int,
    context: int,
    *,
    prompt_tokens: int = 0,
    draft_rows: int = -1,
    row_contexts: tuple[int, ...] = (),
) -> Execution:
    """A prepared graph: capacities from its descriptor, activity from its lanes."""
    return Execution(
        kind=d.kind,
        capacity_tokens=d.packed_capacity + d.prefill_capacity,
        capacity_rows=max(d.batch_capacity, d.row_capacity),  # or a prefill's prompt lanes
        tokens=tokens,
        rows=rows,
        context=context,
        draft_steps=d.proposal_depth,
        descriptor=d,
        prompt_tokens=prompt_tokens,
        draft_rows=draft_rows,
        row_contexts=row_contexts,
    )


class DeviceModel(Protocol):
    """Nominal duration of one execution in ms (noise is the harness's job)."""

    name: str

    def duration_ms(self, e: Execution) -> float: ...
