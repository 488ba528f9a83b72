"""The prepared state programs' shapes, in one place.

Every runtime prepares the same three state programs (compiler/state_ops.py: snapshot,
restore and initialization, each one request slot and one snapshot row), and every
catalog Helios schedules from lists them beside the recipe's inference programs: the
runtime's (runtime/assembly.py) and the simulators' (simulate/multiturn.py,
scripts/scheduling_sim/plan_bench.py). They live here, outside the compiler, because the
compiler needs torch and the simulators and Helios never import it; a copy in each would drift (the
benchmark catalog once lacked initialization).
"""

from __future__ import annotations

from ignition.components.catalog import Descriptor, GraphKind

SNAPSHOT = Descriptor(GraphKind.SNAPSHOT, 1, 0, 1, 1)
RESTORE = Descriptor(GraphKind.RESTORE, 1, 0, 1, 1)
INIT = Descriptor(GraphKind.INIT, 1, 0, 1, 1)  # a fresh request's zero state
STATE_PROGRAMS = (SNAPSHOT, RESTORE, INIT)


def state_programs(initialize: bool = True) -> tuple[Descriptor, ...]:
    """The state programs a catalog lists; ``initialize`` False leaves out the init
    program (fresh requests then start from a state zeroed outside Helios)."""
    if initialize:
        return STATE_PROGRAMS
    return tuple(d for d in STATE_PROGRAMS if d.kind is not GraphKind.INIT)
