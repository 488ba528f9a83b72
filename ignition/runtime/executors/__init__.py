"""Executors registered by graph kind: the worker routes each plan to its kind's executor.

- ``program``: prefill, decode, speculative and mixed frames (binding, PLE rows, prompt
  scoring at launch; result decoding at the wait);
- ``state_copy``: initialization, restore and snapshot copies (compiler.state_ops);
- ``vision``: encoding a request's active window of images.

They share one :class:`ExecutorContext` (state, programs, slot resources and the
per-request :class:`RequestLedger`), so a restore's prompt cursor is where the program
executor continues, and a vision frame's encoded images are what it binds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ignition.components.program_kinds import GraphKind
from ignition.runtime.executors.base import Executor, SettledFrame, WorkerError
from ignition.runtime.executors.context import ExecutorContext, PromptScorer
from ignition.runtime.executors.ledger import RequestLedger
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


__all__ = [
    "EXECUTORS",
    "STATE_COPY_KINDS",
    "Executor",
    "ExecutorContext",
    "ProgramExecutor",
    "PromptScorer",
    "RequestLedger",
    "SettledFrame",
    "StateCopyExecutor",
    "VisionExecutor",
    "WorkerError",
    "executors_for",
]
