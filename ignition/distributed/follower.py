"""The other ranks' side: run rank zero's broadcast calls (launch, wait, release, Stop) on
this rank's ``ModelWorker``; a frame rank zero failed is never waited for."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import torch.distributed as dist

from ignition.distributed.context import TensorParallel
from ignition.distributed.faults import RankFault
from ignition.distributed.ranks import (
    CarryHistory,
    LaneRequest,
    Launch,
    RankReport,
    Release,
    Stop,
    Wait,
    describe,
    guarded_launch,
    needs_agreement,
    rank_report,
)
from ignition.helios import RequestHandle
from ignition.runtime.executors.frames import FatalWorkerError
from ignition.runtime.executors.worker import ModelWorker, WorkerError
from ignition.runtime.requests.table import LiveRequest


@dataclass
class _Failed:
    """A launch that raised on this rank after the frame was agreed (reported at wait)."""

    error: str


@dataclass
class _Follower:
    worker: ModelWorker
    tp: TensorParallel
    requests: dict[RequestHandle, LaneRequest] = field(default_factory=dict)
    launched: dict[int, object] = field(default_factory=dict)  # fence -> launch or _Failed
    faults: tuple[RankFault, ...] = ()  # test-only (ignition.distributed.faults)

    def _check_fault(self, stage: str, lanes) -> None:
        for fault in self.faults:
            fault.check(self.tp.rank, stage, lanes, self._prompt_of)

    def _prompt_of(self, handle: RequestHandle) -> tuple[int, ...]:
        known = self.requests.get(handle)
        return () if known is None else known.request.prompt_ids

    def launch(self, message: Launch) -> None:
        self.requests.update(message.new_requests)
        live = {}
        for lane in message.plan.lanes:
            known = self.requests[lane.handle]
            live[lane.handle] = LiveRequest(
                known.request,
                lane.handle,
                sink=None,  # type: ignore[arg-type]
                detokenizer=None,  # type: ignore[arg-type]
                replay_ids=known.replay_ids,
                state_row=message.state_rows.get(lane.handle),
            )

        lanes = message.plan.lanes
        try:
            self.launched[message.fence.value] = guarded_launch(
                self.worker,
                self.tp,
                message.plan,
                message.fence,
                live,
                prelude=lambda: self._check_fault("launch", lanes),
                after_agreement=lambda: self._check_fault("run", lanes),
            )
        except FatalWorkerError:
            raise  # this rank cannot continue; rank zero's collectives fail on its exit
        except WorkerError:
            pass  # another rank failed to stage: rank zero fails the frame, none waits for it
        except Exception as err:
            if not needs_agreement(message.plan):
                self.launched[message.fence.value] = _Failed(describe(err))

    def wait(self, message: Wait) -> None:
        fence = message.fence.value
        for stale in [f for f in self.launched if f < fence]:  # frames rank zero failed
            del self.launched[stale]
        launched = self.launched.pop(fence, None)
        report = RankReport(self.tp.rank)
        if launched is None:
            report = replace(report, error=f"fence {fence} was never launched here")
        elif isinstance(launched, _Failed):
            report = replace(report, error=launched.error)
        else:
            try:
                self._check_fault("wait", launched.plan.lanes)  # type: ignore[attr-defined]
                result = self.worker.wait(launched)
            except Exception as err:
                report = replace(report, error=describe(err))
            else:
                report = rank_report(self.tp.rank, result, self.worker, self.tp.debug)
        dist.gather_object(report, None, dst=0, group=self.tp.cpu_group)

    def release(self, message: Release) -> None:
        self.requests.pop(message.handle, None)
        self.worker.release(message.handle)


def follow(worker: ModelWorker, tp: TensorParallel) -> None:
    """A non-zero rank's loop: run rank zero's calls until it sends Stop."""
    follower = _Follower(worker, tp, faults=RankFault.from_env())
    while True:
        box: list[Any] = [None]
        dist.broadcast_object_list(box, src=0, group=tp.control_group)
        message = box[0]
        if isinstance(message, Stop):
            return
        if isinstance(message, Launch):
            follower.launch(message)
        elif isinstance(message, Wait):
            follower.wait(message)
        elif isinstance(message, Release):
            follower.release(message)
        elif isinstance(message, CarryHistory):
            worker.carry_history(message.old, message.new)
        else:
            raise TypeError(f"rank {tp.rank}: unknown message {type(message).__name__}")


def await_stop(tp: TensorParallel) -> None:
    """A non-zero rank whose work runs no loop (a build) takes rank zero's Stop here."""
    box: list[Any] = [None]
    dist.broadcast_object_list(box, src=0, group=tp.control_group)
    if not isinstance(box[0], Stop):
        raise TypeError(f"rank {tp.rank}: expected Stop, got {type(box[0]).__name__}")
