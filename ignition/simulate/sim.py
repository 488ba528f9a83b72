"""Drives the real Helios Scheduler against a simulated device: frames run one after
another (two may be queued), each its device model's duration times lognormal noise
(docs/simulate.md, "sim.py")."""

from __future__ import annotations

import math
import random
from functools import partial
from typing import Any

from ignition.helios import (
    HEAD_DRAFTS,
    CompletionRecord,
    CompletionReport,
    ExecutionTiming,
    Fence,
    LaneRole,
    RequestHandle,
    RequestSpec,
    ScheduledPlan,
    Scheduler,
)
from ignition.simulate import jit_queue, sim_report, trace_frames
from ignition.simulate.acceptance import COPIES, MAX_DEPTH, Round, draw_round
from ignition.simulate.cost_what_ifs import estimate_at_ready_rows, ple_stall_ns
from ignition.simulate.engine import LateWatch
from ignition.simulate.host_gather import HostGather
from ignition.simulate.results import RequestRecord, RunResult
from ignition.simulate.scenario import Scenario
from ignition.simulate.sim_durations import duration_ms, nominal_ns, sample_ns
from ignition.simulate.sim_rounds import confidence_sidecar, device_rows
from ignition.simulate.sim_state import NS_PER_MS, Running, Stream, execution_record


class Simulation:
    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.rng = random.Random(scenario.seed)
        self.scheduler = Scheduler(
            scenario.catalog,
            scenario.policy,
            resources=scenario.resources,
            speculation=scenario.speculation,
        )
        if scenario.preseed_costs:
            for d in self.scheduler.programs().inference:
                self.scheduler.seed_cost(d, nominal_ns(scenario, d))
        order = sorted(range(len(scenario.requests)), key=lambda i: scenario.requests[i].arrival_ms)
        self.streams = [Stream(i, scenario.requests[i]) for i in order]
        for s in self.streams:
            r = s.request
            s.record = RequestRecord(s.index, r.arrival_ms, r.prompt_tokens, r.output_tokens)
        self.by_handle: dict[RequestHandle, Stream] = {}
        # admitted and not finished: what a frame can leave idle (by_handle keeps every
        # stream a run admitted, so counting over it grew with the trace)
        self.unfinished: dict[RequestHandle, Stream] = {}
        self.graphs: dict[str, list[float]] = {}
        self.executions: list[ExecutionRecord] = []
        self.prompt_tokens = 0
        self.output_tokens = 0
        self.speculation: dict[str, list[int]] = {}  # _count_round
        self.watch: LateWatch | None = None  # stops a run that can no longer meet its guard
        self.aborted = False
        self.end_ns = 0  # where the last run stopped (run_result)
        # frames planned ahead on the device; the transport has two slots. A what-if of
        # one (plan only when the device is idle) costs no device time here, because the
        # simulator spends none between a completion and the next plan
        self.window = 2
        # What-if transport: the second slot is filled only this long before the frame
        # ahead of it ends (the host round trip a just-in-time plan needs) instead of at
        # once, so a prompt that arrives meanwhile is planned ahead of it. None: at once.
        self.queue_lead_ns: int | None = None
        # What-if transport, without the oracle (jit_queue.py): the second slot is filled
        # this long before the frame ahead is expected to end by Helios's estimate; the
        # host plans no earlier than plan_at_ns. None: at once.
        self.jit_lead_ns: int | None = None
        self.jit_wake_ns: int | None = None  # also wakes on the completion, plans in this
        self.plan_at_ns = 0
        self.host = HostGather(scenario.durations)  # the prompt-row gather (host_gather.py)
        # What-if admission (``prompt-pairs``): with two slots free, the next two prompts'
        # rows are gathered back to back and the first is held until the second's are
        # ready, so both can share one frame (a hold rule that foresees row readiness).
        self.prompt_pairs = False
        # What-ifs on the cost model's view (cost_what_ifs.py): estimates at the rows a
        # program could carry now; the PLE gather reported as a readiness stall.
        self.row_oracle = False
        self.ple_stall = False
        self.trace: Any = None  # a runtime.tracing.TraceRecorder fed each frame (trace_frames.py)

    def run(self) -> dict[str, Any]:
        return sim_report.report(self, self._loop())

    def _loop(self) -> int:
        """Runs until every request finished, ``end_ms`` or the late watch trips; returns
        the simulated end time in ns."""
        end_ms = self.scenario.end_ms
        end_ns = round(end_ms * NS_PER_MS) if math.isfinite(end_ms) else 1 << 62
        pending = list(self.streams)
        running: list[Running] = []
        now, device_free, fence, completed = 0, 0, 0, 0
        while now <= end_ns:
            while pending and pending[0].arrival_ns <= now:
                if not self.scheduler.can_admit():
                    break
                if self.prompt_pairs:
                    self._gather_pair(pending, now)
                if self._prompt_ready_ns(pending[0], now) > now:
                    break  # its prompt rows are still being gathered on the host
                self._admit(pending.pop(0))
            waiting = 0  # arrived, no slot free: the slot-pressure rule's input
            if not self.scheduler.can_admit():
                while waiting < len(pending) and pending[waiting].arrival_ns <= now:
                    waiting += 1
            self.scheduler.note_waiting(waiting)
            self.scheduler.advance_to(now)
            wake = None
            while len(running) < self.window:
                if running and self.queue_lead_ns is not None:
                    due = running[-1].end_ns - self.queue_lead_ns
                    if now < due:
                        wake = due
                        break
                if self.jit_lead_ns is not None:
                    self.plan_at_ns = jit_queue.plan_at_ns(
                        self.scheduler,
                        running,
                        self.plan_at_ns,
                        self.jit_lead_ns,
                        now,
                        self.jit_wake_ns,
                    )
                    if now < self.plan_at_ns:
                        wake = self.plan_at_ns
                        break
                if self.row_oracle:
                    estimate_at_ready_rows(
                        self.scheduler, self._ready_contexts(), partial(duration_ms, self.scenario)
                    )
                plan = self.scheduler.plan()
                if plan is None:
                    break
                fence += 1
                self.scheduler.commit(plan, Fence(fence))
                klass = str(plan.execution_class)
                start = max(now, device_free)
                contexts = [self.by_handle[lane.handle].context for lane in plan.lanes]
                duration = sample_ns(self.scenario, plan, contexts, self.rng)
                device_free = start + duration
                idle = self._idle_decoders(plan)
                running.append(
                    Running(fence, plan, now, start, device_free, duration, klass, idle)
                )
            arrivals = [s.arrival_ns for s in pending[:1]]
            arrivals += [s.ready_ns for s in pending[:1] if s.ready_ns is not None]
            upcoming = [r.end_ns for r in running[:1]] + [a for a in arrivals if a > now]
            upcoming += [wake] if wake is not None else []
            if not upcoming:
                break
            now = min(upcoming)
            if running and running[0].end_ns <= now:
                self.scheduler.advance_to(now)
                self._complete(running.pop(0), now)
                completed += 1
                watched = self.watch is not None and completed % 64 == 0
                if watched and self.watch.exceeded(now / NS_PER_MS):
                    self.aborted = True
                    break
        return min(now, end_ns)

    def _prompt_ready_ns(self, stream: Stream, now: int) -> int:
        """When the stream's prompt rows are on the device: a device with
        ``prompt_ready_ms`` (PLE rows gathered on the host) delivers them one prompt after
        another, each gather starting once a slot is free for it."""
        if stream.ready_ns is None:
            if not self.host.delivers:
                return now
            r = stream.request
            ready_ms = self.host.gather(stream.record, r.prompt_tokens, now / NS_PER_MS)
            stream.ready_ns = round(ready_ms * NS_PER_MS)
        return stream.ready_ns

    def _gather_pair(self, pending: list[Stream], now: int) -> None:
        """The ``prompt-pairs`` what-if: the head and the next arrived prompt gathered
        together when two slots are free; the head is ready with the second."""
        head = pending[0]
        if head.ready_ns is not None or len(pending) < 2 or pending[1].arrival_ns > now:
            return
        if self.scheduler.usage().num_free_slots < 2:
            return
        self._prompt_ready_ns(head, now)
        head.ready_ns = self._prompt_ready_ns(pending[1], now)

    def _admit(self, stream: Stream) -> None:
        r = stream.request
        spec = RequestSpec(
            num_prompt_tokens=r.prompt_tokens,
            max_output_tokens=r.output_tokens,
            message_endpoints=r.message_endpoints,
            acceptance_prior=r.acceptance_prior,
            proposal_source=r.proposal_source,
            proposal_choices=r.proposal_choices,
            # as the runtime's: copies follow every token before them, none before the first
            host_drafts=r.copies,
            max_drafts=0 if r.copies else None,
        )
        stream.handle = self.scheduler.admit(spec)
        stream.record.admitted_ms = self.scheduler.now_ns / NS_PER_MS
        stream.remaining_output = r.output_tokens
        self.by_handle[stream.handle] = stream
        self.unfinished[stream.handle] = stream

    def _ready_contexts(self) -> list[int]:
        """The cached context of every admitted stream past its prompt with output left."""
        return [
            s.context
            for s in self.unfinished.values()
            if s.context >= s.request.prompt_tokens and s.remaining_output > 0
        ]

    def _idle_decoders(self, plan: ScheduledPlan) -> int:
        served = {lane.handle for lane in plan.lanes}
        return sum(
            1
            for handle, s in self.unfinished.items()
            if handle not in served
            and s.context >= s.request.prompt_tokens
            and s.remaining_output > 0
        )

    def _rounds(self, plan: ScheduledPlan) -> dict[RequestHandle, Round]:
        """This frame's speculative round per decoding lane: the true acceptance and the
        drafter's confidence (``acceptance.py``; with no round spread and a perfect
        drafter, the request's own conditionals, drawing nothing)."""
        out = {}
        for lane in plan.lanes:
            if lane.role is not LaneRole.PROMPT:
                r = self.by_handle[lane.handle].request
                copied = lane.proposal_source == COPIES and r.copy_acceptance
                out[lane.handle] = draw_round(
                    r.copy_acceptance if copied else r.acceptance,
                    r.round_sigma,
                    self.scenario.confidence_noise,
                    self.rng,
                )
        return out

    def _count_round(self, source: str | None, tokens: int) -> None:
        """Decode lane-frames and their tokens ("all"); per source, rounds that verified
        drafts and their tokens (``source`` None for a lane without drafts)."""
        for key in ("all", source) if source else ("all",):
            counts = self.speculation.setdefault(key, [0, 0])
            counts[0] += 1
            counts[1] += tokens

    def _offer_copies(self, plan: ScheduledPlan) -> None:
        """After a frame, as the runtime's offers hook (runtime/loop/proposal_hooks.py): each
        copying request it served finds its next round's copy or not
        (``SimRequest.copy_found``) and Helios is told
        the copy's length; a request that lets Helios choose is offered it beside the
        head's drafts."""
        for lane in plan.lanes:
            stream = self.by_handle[lane.handle]
            r = stream.request
            if not r.copies or stream.remaining_output <= 0:
                continue
            length = MAX_DEPTH if self.rng.random() < r.copy_found else 0
            if r.proposal_choices:
                self.scheduler.offer_drafts(lane.handle, {HEAD_DRAFTS: None, COPIES: length})
            else:
                self.scheduler.limit_drafts(lane.handle, length)

    def _complete(self, run: Running, now: int) -> None:
        plan = run.plan
        d = plan.descriptor
        device = d.is_device_allocated and d.proposal_depth > 0
        rounds = self._rounds(plan)
        rows = (
            device_rows(plan, rounds)
            if device
            else [lane.query_length for lane in plan.lanes]
        )
        records = []
        for lane, q in zip(plan.lanes, rows, strict=True):
            stream = self.by_handle[lane.handle]
            if lane.role is LaneRole.PROMPT:
                if stream.record.prompt_start_ms is None:
                    stream.record.prompt_start_ms = run.start_ns / NS_PER_MS
                count = lane.max_advance_tokens if stream.remaining_output > 0 else 0
                self.prompt_tokens += lane.num_prompt_tokens
                stream.context += lane.num_prompt_tokens
                records.append(CompletionRecord(lane.handle, lane.num_prompt_tokens, (1,) * count))
            else:
                got = rounds[lane.handle].accepted(q - 1, self.rng)
                stream.record.verified(q)
                count = min(stream.remaining_output, 1 + got)
                self._count_round(lane.proposal_source.name if q > 1 else None, count)
                records.append(
                    CompletionRecord(
                        lane.handle, 0, (1,) * count, num_verified_tokens=q if device else 0
                    )
                )
            stream.remaining_output -= count
            stream.context += count
            self.output_tokens += count
        durations = self.scenario.durations
        stall = ple_stall_ns(durations, plan, run.device_ns) if self.ple_stall else 0
        timing = ExecutionTiming(run.device_ns, now - run.commit_ns, readiness_stall_ns=stall)
        if device:
            sidecar = confidence_sidecar(plan, rounds)
            report = CompletionReport(records, timing, sidecar)
        else:
            report = CompletionReport(records, timing)
        tokens = self.scheduler.complete(Fence(run.fence), report)
        if self.trace is not None:
            trace_frames.record_frame(self.trace, run, records, rows, self.by_handle, now, self.scheduler)
        self._offer_copies(plan)
        self.graphs.setdefault(d.name, []).append(run.device_ns / NS_PER_MS)
        self.executions.append(execution_record(run, records, rows))
        published: dict[RequestHandle, int] = {}
        for token in tokens:
            published[token.handle] = published.get(token.handle, 0) + 1
        t_ms = now / NS_PER_MS
        for handle, count in published.items():
            self.scheduler.published_output(handle, Fence(run.fence))
            stream = self.by_handle[handle]
            stream.record.deliver(t_ms, count, stream.remaining_output)
            if stream.record.finish_ms is not None:
                self.unfinished.pop(handle, None)

    def result(self, end_ns: int, policy: str = "helios") -> RunResult:
        """The run in the room's common shape (metrics, plots, capacity search)."""
        return RunResult(
            policy=policy,
            requests=[s.record for s in sorted(self.streams, key=lambda s: s.index)],
            executions=list(self.executions),
            end_ms=end_ns / NS_PER_MS,
            slots=self.scheduler.usage().num_request_slots,
        )

    def run_result(self, policy: str = "helios") -> RunResult:
        self.end_ns = self._loop()
        result = self.result(self.end_ns, policy)
        result.info["aborted"] = self.aborted
        return result



def simulate(scenario: Scenario) -> dict[str, Any]:
    return Simulation(scenario).run()

