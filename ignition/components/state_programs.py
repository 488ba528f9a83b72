"""The state programs' shapes (snapshot, restore, init) that every catalog Helios schedules
lists beside the inference programs; torch-free, so the runtime and simulators share them."""

from __future__ import annotations

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind

SNAPSHOT = Descriptor(GraphKind.SNAPSHOT, 1, 0, 1, 1)
RESTORE = Descriptor(GraphKind.RESTORE, 1, 0, 1, 1)
INIT = Descriptor(GraphKind.INIT, 1, 0, 1, 1)  # a fresh request's zero state
STATE_PROGRAMS = (SNAPSHOT, RESTORE, INIT)


def state_programs(initialize: bool = True) -> tuple[Descriptor, ...]:
    """The state programs a catalog lists; without ``initialize`` no init program (fresh
    requests then start from a state zeroed outside Helios)."""
    if initialize:
        return STATE_PROGRAMS
    return tuple(d for d in STATE_PROGRAMS if d.kind is not GraphKind.INIT)
