"""Rank zero decides, every rank executes: plan broadcast, per-frame agreement, rank checks.

A staging failure on any rank fails that frame, naming the rank; a failure inside an agreed
program is fatal for the group (``FatalWorkerError``), never a hang.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch.distributed as dist

from ignition.components.program_kinds import GraphKind
from ignition.distributed.context import TensorParallel
from ignition.helios import ConfidenceSidecar, ExecutionTiming, Fence, RequestHandle, ScheduledPlan
from ignition.runtime.executors.frames import FatalWorkerError, FrameResult
from ignition.runtime.executors.worker import ModelWorker, WorkerError
from ignition.runtime.ple.mailbox import Readiness, aggregate_exposed_ns
from ignition.runtime.requests.request import GenerationRequest
from ignition.runtime.requests.table import LiveRequest


@dataclass(frozen=True)
class LaneRequest:
    """What a follower's worker reads of a live request (no sink, no detokenizer)."""

    request: GenerationRequest
    replay_ids: tuple[int, ...]


@dataclass(frozen=True)
class Launch:
    fence: Fence
    plan: ScheduledPlan
    new_requests: dict[RequestHandle, LaneRequest]  # handles the followers have not seen
    state_rows: dict[RequestHandle, int | None]


@dataclass(frozen=True)
class Wait:
    fence: Fence


@dataclass(frozen=True)
class Release:
    handle: RequestHandle


@dataclass(frozen=True)
class CarryHistory:
    old: RequestHandle
    new: RequestHandle


@dataclass(frozen=True)
class Stop:
    pass


@dataclass(frozen=True)
class RankReport:
    """One rank's account of a completed frame."""

    rank: int
    device_ns: int = 0
    error: str | None = None
    sidecar_problem: str | None = None
    digest: tuple[str, ...] | None = None  # debug mode: records and committed state
    # This rank's PLE deliveries, and whether their stalls count in its device interval.
    readiness: tuple[Readiness, ...] = ()
    counts_stalls: bool = False


def rank_report(rank: int, result: FrameResult, worker: ModelWorker, debug: bool) -> RankReport:
    """A rank's report of a frame its worker completed."""
    return RankReport(
        rank,
        result.timing.device_ns,
        sidecar_problem=sidecar_problem(result.sidecar),
        digest=frame_digest(result, worker) if debug else None,
        readiness=tuple(result.readiness),
        counts_stalls=worker.ple is not None and worker.ple.inside_interval,
    )


def frame_timing(wall_ns: int, reports: Sequence[RankReport]) -> ExecutionTiming:
    """The frame's timing: the ranks' maximum interval, and the readiness stall during which
    any rank waited for PLE rows (at most that maximum)."""
    intervals = tuple(int(r.device_ns) for r in reports)
    stall = aggregate_exposed_ns([r.readiness for r in reports if r.counts_stalls])
    return ExecutionTiming.across_ranks(intervals, wall_ns, min(stall, max(intervals, default=0)))


def describe(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"


def sidecar_problem(sidecar: ConfidenceSidecar | None) -> str | None:
    """Why a peer's confidence sidecar is not a set of probabilities, or None when it is."""
    if sidecar is None:
        return None
    for p, plane in enumerate(sidecar.planes):
        for row, values in enumerate(plane):
            for col, value in enumerate(values):
                if not (math.isfinite(value) and 0.0 <= value <= 1.0):
                    return f"confidence plane {p} row {row} position {col} = {value!r}"
    return None


DIGEST_PARTS = ("emitted tokens", "committed lengths")


def frame_digest(result: FrameResult, worker: ModelWorker) -> tuple[str, ...]:
    """Hashes of the frame's emitted records and committed lengths, per :data:`DIGEST_PARTS`
    entry (sharded tensors and page ids may differ by design)."""
    records = tuple(
        (r.handle, r.num_prompt_tokens, r.token_ids, r.is_finished, r.num_verified_tokens)
        for r in result.records
    )
    lengths = worker.state.seq_lens.tolist()
    committed = tuple(lengths[r.handle.slot] for r in result.records)
    parts = (records, committed)
    return tuple(hashlib.sha256(repr(p).encode()).hexdigest()[:16] for p in parts)


class _Agreement:
    """The per-frame vote in ``before_run``: every rank says staged (None) or why not."""

    def __init__(self, tp: TensorParallel, after: Callable[[], None] | None = None) -> None:
        self.tp = tp
        self.after = after  # test-only: a fault once the frame is agreed
        self.has_voted = False
        self.is_agreed = False

    def vote(self, fence: Fence, error: str | None = None) -> None:
        self.has_voted = True
        votes: list[Any] = [None] * self.tp.world_size
        dist.all_gather_object(votes, error, group=self.tp.cpu_group)
        for rank, vote in enumerate(votes):
            if vote is not None and rank != self.tp.rank:
                raise WorkerError(f"fence {fence.value}: rank {rank} could not stage: {vote}")
        self.is_agreed = error is None
        if self.after is not None:
            self.after()


def needs_agreement(plan: ScheduledPlan) -> bool:
    """Program frames run collectives; state operations are rank-local copies."""
    return plan.descriptor.kind not in (GraphKind.SNAPSHOT, GraphKind.RESTORE, GraphKind.INIT)


def guarded_launch(
    worker: ModelWorker,
    tp: TensorParallel,
    plan: ScheduledPlan,
    fence: Fence,
    live: dict[RequestHandle, LiveRequest],
    prelude: Callable[[], None] | None = None,
    after_agreement: Callable[[], None] | None = None,
):
    """``worker.launch`` with the agreement as ``before_run``; a rank failing before its vote
    votes its error. A failure after agreement raises :class:`FatalWorkerError`."""
    agreement = _Agreement(tp, after_agreement)
    worker.before_run = agreement.vote
    try:
        if prelude is not None:
            prelude()
        return worker.launch(plan, fence, live)
    except Exception as err:
        if not needs_agreement(plan):
            raise
        if not agreement.has_voted:
            agreement.vote(fence, describe(err))
        if agreement.is_agreed:
            tp.health.broken = (
                f"fence {fence.value}: the program failed on rank {tp.rank} after every rank "
                f"agreed to run it ({describe(err)})"
            )
            raise FatalWorkerError(
                f"{tp.health.broken}; the ranks' collectives are out of step, so the group stops"
            ) from err
        raise
    finally:
        worker.before_run = None


class RankZeroWorker:
    """The engine's worker on rank zero of a tensor-parallel group (see the module doc)."""

    def __init__(self, inner: ModelWorker, tp: TensorParallel) -> None:
        self.inner = inner
        self.tp = tp
        self._known: set[RequestHandle] = set()  # requests the followers hold
        # Frames each rank delivered PLE rows for (its own table, mailbox and stalls).
        self.ple_frames: Counter[int] = Counter()

    @property
    def score_prompt(self):
        """Rank zero's prompt-logprobs stage, run by every rank to keep the gathers in step."""
        return self.inner.score_prompt

    def _send(self, message: object) -> None:
        dist.broadcast_object_list([message], src=0, group=self.tp.control_group)

    def launch(self, plan: ScheduledPlan, fence: Fence, live: dict[RequestHandle, LiveRequest]):
        new = {}
        for lane in plan.lanes:
            if lane.handle not in self._known:
                request = live[lane.handle]
                new[lane.handle] = LaneRequest(request.request, request.replay_ids)
                self._known.add(lane.handle)
        rows = {lane.handle: live[lane.handle].state_row for lane in plan.lanes}
        self._send(Launch(fence, plan, new, rows))
        return guarded_launch(self.inner, self.tp, plan, fence, live)

    def wait(self, launched) -> FrameResult:
        self._send(Wait(launched.fence))
        error = None
        try:
            result = self.inner.wait(launched)
        except Exception as err:
            result, error = None, err
        own = RankReport(0) if result is None else rank_report(0, result, self.inner, False)
        if result is not None and self.tp.debug:
            own = replace(own, digest=frame_digest(result, self.inner))
        reports: list[Any] = [None] * self.tp.world_size
        dist.gather_object(own, reports, dst=0, group=self.tp.cpu_group)
        if error is not None:
            raise error
        assert result is not None
        fence = launched.fence.value
        for report in reports[1:]:
            if report.error is not None:
                raise WorkerError(f"fence {fence}: rank {report.rank} failed: {report.error}")
            if report.sidecar_problem is not None:
                raise WorkerError(
                    f"fence {fence}: rank {report.rank}'s {report.sidecar_problem} is not a "
                    "probability"
                )
            if self.tp.debug and report.digest != own.digest:
                differ = [
                    part
                    for part, theirs, ours in zip(
                        DIGEST_PARTS, report.digest, own.digest, strict=True
                    )
                    if theirs != ours
                ]
                raise WorkerError(
                    f"fence {fence}: rank {report.rank}'s {' and '.join(differ)} differ from "
                    "rank 0's (--tensor-parallel-debug)"
                )
        for report in reports:
            if report.readiness:
                self.ple_frames[report.rank] += 1
        return replace(result, timing=frame_timing(result.timing.wall_ns, reports))

    def release(self, handle: RequestHandle) -> None:
        self._send(Release(handle))
        self._known.discard(handle)
        self.inner.release(handle)

    def carry_history(self, old: RequestHandle, new: RequestHandle) -> None:
        self._send(CarryHistory(old, new))
        self.inner.carry_history(old, new)
