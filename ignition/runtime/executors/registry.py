"""The registry: every graph kind's executor, over one shared context."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ignition.components.program_kinds import GraphKind
from ignition.runtime.executors.base import Executor
from ignition.runtime.executors.context import ExecutorContext
from ignition.runtime.executors.program import ProgramExecutor
from ignition.runtime.executors.state_copy import StateCopyExecutor
from ignition.runtime.executors.vision import VisionExecutor

# The state programs of compiler.state_ops: initialization, restore and snapshots.
STATE_COPY_KINDS = (GraphKind.SNAPSHOT, GraphKind.RESTORE, GraphKind.INIT)

# The registry: every graph kind's executor. Kinds that name the same executor share one
# instance (one per worker), so its per-frame state is the same whichever kind it runs.
EXECUTORS: Mapping[GraphKind, Callable[[ExecutorContext], Executor]] = {
    GraphKind.PREFILL: ProgramExecutor,
    GraphKind.DECODE: ProgramExecutor,
    GraphKind.SPECULATIVE: ProgramExecutor,
    GraphKind.MIXED: ProgramExecutor,
    **dict.fromkeys(STATE_COPY_KINDS, StateCopyExecutor),
    GraphKind.VISION: VisionExecutor,
}


def executors_for(context: ExecutorContext) -> dict[GraphKind, Executor]:
    """The executor of every graph kind, over one shared context."""
    made: dict[Callable[[ExecutorContext], Executor], Executor] = {}
    by_kind: dict[GraphKind, Executor] = {}
    for kind, make in EXECUTORS.items():
        if make not in made:
            made[make] = make(context)
        by_kind[kind] = made[make]
    return by_kind
