"""The vision executor: encode each lane's active window of images at launch."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import torch

from ignition.compiler.vision_program import VisionRunner
from ignition.helios import Fence, RequestHandle, ScheduledPlan
from ignition.runtime.executors.base import SettledFrame, WorkerError
from ignition.runtime.executors.context import ExecutorContext
from ignition.runtime.executors.frames import FrameResult
from ignition.runtime.vision.binding import ImageBindingError, RequestVision

if TYPE_CHECKING:
    from ignition.runtime.requests.table import LiveRequest


class VisionExecutor:
    def __init__(self, context: ExecutorContext) -> None:
        self.context = context

    def launch(
        self, plan: ScheduledPlan, fence: Fence, live: dict[RequestHandle, LiveRequest]
    ) -> SettledFrame:
        context = self.context
        storage = context.feature_storage
        name = plan.descriptor.name
        if name not in context.programs or storage is None:
            raise WorkerError(f"fence {fence.value}: no prepared vision program {name}")
        encoder = VisionRunner([context.programs[name]])
        began = time.perf_counter_ns()
        for lane in plan.lanes:
            request = live[lane.handle]
            if request.request.images is None:
                raise WorkerError(f"fence {fence.value}: vision work for a text request")
            try:
                context.ledger.vision[lane.handle] = RequestVision.encode(
                    request.request.images,
                    request.vision_window,
                    encoder,
                    storage[lane.handle.slot],
                )
            except (ImageBindingError, ValueError) as err:
                raise WorkerError(f"{name}: {err}") from None
        if storage.is_cuda:
            torch.cuda.synchronize(storage.device)
        elapsed = time.perf_counter_ns() - began
        return SettledFrame(fence, plan, max(1, elapsed), elapsed)

    def wait(self, launched: SettledFrame) -> FrameResult:
        return launched.result()
