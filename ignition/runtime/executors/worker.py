"""The worker: routes each ScheduledPlan to its graph kind's executor and reports completion."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ignition.compiler.graph import PreparedProgram
from ignition.compiler.programs import Program
from ignition.compiler.state_ops import StateOperations
from ignition.helios import Fence, LaneRole, RequestHandle, ScheduledPlan
from ignition.model.state import ModelState
from ignition.runtime.executors.base import WorkerError
from ignition.runtime.executors.binding import request_seed
from ignition.runtime.executors.context import ExecutorContext, PromptScorer
from ignition.runtime.executors.frames import FrameResult
from ignition.runtime.executors.history import carry_history
from ignition.runtime.executors.ple_rows import attach_ple
from ignition.runtime.executors.registry import STATE_COPY_KINDS, executors_for
from ignition.runtime.executors.resources import SlotResources
from ignition.runtime.executors.results import NON_FINITE_MESSAGE
from ignition.runtime.ple.delivery import FrameDelivery
from ignition.runtime.proposals.copy_proposals import PromptLookup
from ignition.runtime.proposals.registry import Proposals
from ignition.runtime.vision.binding import ImageEncoder

if TYPE_CHECKING:
    from ignition.runtime.requests.table import LiveRequest

__all__ = [
    "NON_FINITE_MESSAGE",
    "STATE_COPY_KINDS",
    "ModelWorker",
    "PromptScorer",
    "WorkerError",
    "request_seed",
]


class _OnContext:
    """A worker attribute kept on the executors' shared context."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, worker: Any, owner: type | None = None) -> Any:
        return self if worker is None else getattr(worker.context, self.name)

    def __set__(self, worker: Any, value: Any) -> None:
        setattr(worker.context, self.name, value)


class ModelWorker:
    state = _OnContext()
    programs = _OnContext()
    resources = _OnContext()
    eos_token_ids = _OnContext()
    state_ops = _OnContext()
    encode_images = _OnContext()
    feature_storage = _OnContext()
    score_prompt = _OnContext()
    ple = _OnContext()
    before_run = _OnContext()

    def __init__(
        self,
        state: ModelState,
        programs: dict[str, tuple[Program, PreparedProgram]],
        resources: SlotResources,
        eos_token_ids: frozenset[int],
        state_ops: StateOperations | None = None,
        encode_images: ImageEncoder | None = None,
        feature_storage: torch.Tensor | None = None,
        snapshot_rows: int = 0,
        score_prompt: PromptScorer | None = None,
        prompt_lookup: PromptLookup | None = None,
    ) -> None:
        self.context = ExecutorContext(
            state,
            programs,
            resources,
            eos_token_ids,
            state_ops,
            encode_images=encode_images,
            feature_storage=feature_storage,
            score_prompt=score_prompt,
            proposals=Proposals(prompt_lookup),
        )
        self.executors = executors_for(self.context)
        # The store's first rows the checkpoint cache retains into (the rest are private
        # vision-window rows); resolved once per rank at assembly.
        self.snapshot_rows = snapshot_rows

    def attach_ple(self, delivery: FrameDelivery) -> None:
        """Deliver the n-gram table's rows (host / disk residency)."""
        attach_ple(self.context, delivery)

    def launch(self, plan: ScheduledPlan, fence: Fence, live: dict[RequestHandle, LiveRequest]):
        return self.executors[plan.descriptor.kind].launch(plan, fence, live)

    def is_done(self, launched) -> bool:
        """Whether ``launched`` finished on the device (frames that ran at launch have)."""
        inflight = getattr(launched, "inflight", None)
        return inflight is None or inflight.is_done()

    def wait(self, launched) -> FrameResult:
        result = self.executors[launched.plan.descriptor.kind].wait(launched)
        settle_lengths(self.context, launched.plan, result)
        return result

    def release(self, handle: RequestHandle) -> None:
        self.context.ledger.forget(handle)
        self.context.resources.release(handle.slot)

    def carry_history(self, old: RequestHandle, new: RequestHandle) -> None:
        """``new`` (the next vision window) keeps ``old``'s sampling history."""
        carry_history(self.context, old, new)


def settle_lengths(context: ExecutorContext, plan: ScheduledPlan, result: FrameResult) -> None:
    """Take each read decode lane's uncommitted advance off its slot's length bound."""
    skip = context.ledger.overrun | result.failed.keys()
    committed = {record.handle: len(record.token_ids) for record in result.records}
    for lane in plan.lanes:
        if lane.role is LaneRole.DECODE and lane.handle in committed and lane.handle not in skip:
            context.resources.settle(lane.handle.slot, lane.query_length, committed[lane.handle])
