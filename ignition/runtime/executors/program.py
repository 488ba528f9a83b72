"""The program executor: prefill, decode, speculative and mixed frames."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from ignition.compiler.graph import PreparedProgram, launch, map_tensors
from ignition.compiler.programs import Program
from ignition.helios import ExecutionTiming, Fence, RequestHandle, ScheduledPlan
from ignition.model.prompt_logprobs import PromptScores
from ignition.runtime.executors import prompt_scoring
from ignition.runtime.executors.base import WorkerError
from ignition.runtime.executors.binding import (
    LaneCursor,
    bind_drafts,
    bind_grammar,
    bind_row,
    validate_roles,
)
from ignition.runtime.executors.context import ExecutorContext
from ignition.runtime.executors.frames import FrameResult
from ignition.runtime.executors.launched import LaunchedFrame
from ignition.runtime.executors.ple_rows import prompt_tokens, read_pending, stage_known_rows
from ignition.runtime.executors.prompt_scoring import PromptJob
from ignition.runtime.executors.results import round_result, step_result
from ignition.runtime.ple.mailbox import Delivery

if TYPE_CHECKING:
    from ignition.runtime.requests.request import SamplingParams
    from ignition.runtime.requests.table import LiveRequest


class ProgramExecutor:
    def __init__(self, context: ExecutorContext) -> None:
        self.context = context

    def launch(
        self, plan: ScheduledPlan, fence: Fence, live: dict[RequestHandle, LiveRequest]
    ) -> LaunchedFrame:
        context = self.context
        name = plan.descriptor.name
        if name not in context.programs:
            raise WorkerError(f"fence {fence.value}: no prepared program {name}")
        program, prepared = context.programs[name]
        validate_roles(plan, program)
        # Known rows go to the mailbox first, so the host thread resolves them while this
        # frame is staged (and, on a GPU, while the previous frame still runs).
        deliveries = () if context.ple is None else tuple(self.publish_rows(plan, live))
        try:
            launched = self._launch(plan, fence, live, program, prepared, deliveries)
        except BaseException:
            if context.ple is not None:  # a frame that never ran hands its staging back
                context.ple.discard(deliveries)
            raise
        context.ledger.mark_launched(plan.lanes)
        return launched

    def _launch(
        self,
        plan: ScheduledPlan,
        fence: Fence,
        live: dict[RequestHandle, LiveRequest],
        program: Program,
        prepared: PreparedProgram,
        deliveries: tuple[Delivery, ...],
    ) -> LaunchedFrame:
        context = self.context
        jobs = self.prompt_job(plan, live) or ()
        frame = program.stage()
        offset = 0  # packed offset of the next row: the host prefix sum of query lengths
        eos, num_logprobs, grammars = [], [], []
        cursor = LaneCursor()
        for row, lane in enumerate(plan.lanes):
            request = live[lane.handle]
            offset += bind_row(context, program, frame, row, offset, lane, request, cursor)
            eos.append(terminal_ids(request.request.sampling, context.eos_token_ids))
            num_logprobs.append(request.request.sampling.logprobs)
            grammars.append(bind_grammar(program, frame, row, lane, request))
            bind_drafts(program, frame, row, lane, request, context.proposals)
        program.upload(frame)
        if context.before_run is not None:
            context.before_run(fence)
        launched_ns = time.perf_counter_ns()
        ple_wait_ns = 0
        if deliveries:
            # the program's PLE layer cannot start without them
            ple = context.ple
            rows = ple.await_rows(deliveries)
            staged = getattr(program.inputs, "ple", None)
            stage_known_rows(staged, deliveries, rows, ple.layer_rows, context.ple_staging)
            ple_wait_ns = time.perf_counter_ns() - launched_ns
        scored: list[PromptScores] = []

        def keep(out):
            # The static outputs belong to the program, and a second queued frame of the same
            # program would overwrite them before this frame is read: keep a stream-ordered
            # copy; score the prompt hidden states now, before any later frame rewrites them.
            for job in jobs:
                scored.append(prompt_scoring.score(context, program, job))
            return map_tensors(out, lambda t: t.clone())

        # The host knows which lanes asked for logprobs: an eager run skips them otherwise.
        needs_logprobs = any(n is not None for n in num_logprobs)
        inflight = launch(prepared, snapshot=keep, needs_logprobs=needs_logprobs)
        inside = context.ple.take_inside() if context.ple is not None else ()
        return LaunchedFrame(
            fence, plan, program, inflight, launched_ns, plan.lanes, tuple(eos),
            tuple(num_logprobs), tuple(grammars), jobs, tuple(scored),
            deliveries, ple_wait_ns, inside,
        )  # fmt: skip

    def prompt_job(
        self, plan: ScheduledPlan, live: dict[RequestHandle, LiveRequest]
    ) -> tuple[PromptJob, ...]:
        return prompt_scoring.prompt_job(self.context, plan, live)

    def read_pending(
        self, plan: ScheduledPlan, live: dict[RequestHandle, LiveRequest]
    ) -> dict[RequestHandle, tuple[int, ...]]:
        return read_pending(self.context, plan, live)

    def publish_rows(self, plan: ScheduledPlan, live: dict[RequestHandle, LiveRequest]):
        context = self.context
        cursor = context.ledger.prompt_cursor
        known = self.read_pending(plan, live)
        return context.ple.publish(plan, prompt_tokens(plan, live), cursor, known)

    def wait(self, launched: LaunchedFrame) -> FrameResult:
        context = self.context
        device_ns = launched.inflight.wait()
        wall_ns = time.perf_counter_ns() - launched.launched_ns
        context.ledger.mark_read(launched.lanes)
        readiness, stall_ns = (), 0
        ple = context.ple
        in_graph = ple is not None and ple.in_graph is not None
        if launched.ple_deliveries or launched.ple_inside or in_graph:
            readiness, stall_ns = ple.finish(launched.ple_deliveries, launched.ple_inside)
            if ple.inside_interval:  # CPU: the program's interval holds its wait
                device_ns += launched.ple_wait_ns
        stall_ns = min(stall_ns, device_ns)
        timing = ExecutionTiming(max(1, device_ns), wall_ns, readiness_stall_ns=stall_ns)
        decode = round_result if launched.program.is_round else step_result
        return replace(decode(launched, timing, context.ledger.overrun), readiness=readiness)


def terminal_ids(sampling: SamplingParams, eos_token_ids: frozenset[int]) -> frozenset[int]:
    """The ids that end a row's output on the device: EOS (unless ignored) and stop token ids."""
    stops = frozenset(sampling.stop_token_ids)
    return stops if sampling.ignore_eos else eos_token_ids | stops
