"""The baseline engine: a fixed policy's batches, one after another, on a device model.
A step is one eager execution of exactly its work (``padded``: at the smallest vLLM V1
capture size holding it); outputs are delivered at the end of their step; slots admit
FCFS. A request with ``after`` is sent once that reply finished (docs/simulate.md,
"engine.py")."""

from __future__ import annotations

import bisect
import math
import random
from collections import deque
from collections.abc import Sequence
from dataclasses import replace

from ignition.components.program_kinds import GraphKind
from ignition.simulate.acceptance import draw_round
from ignition.simulate.capture import CaptureSizes, vllm_capture_sizes
from ignition.simulate.devices import DeviceModel, Execution
from ignition.simulate.host_gather import HostGather
from ignition.simulate.results import ExecutionRecord, RequestRecord, RunResult
from ignition.simulate.steps import BaselinePolicy, Batch, Seq
from ignition.simulate.workloads import SimRequest


def batch_kind(batch: Batch) -> GraphKind:
    if batch.prefill and batch.decode:
        return GraphKind.MIXED
    if batch.prefill:
        return GraphKind.PREFILL
    return GraphKind.SPECULATIVE if batch.drafts else GraphKind.DECODE


def batch_execution(batch: Batch, capture: CaptureSizes | None = None) -> Execution:
    """The device's view of one step: eager at its own extents, or with ``capture`` at
    the padded token count (a uniform decode graph also pads whole rows)."""
    rows = len(batch.prefill) + len(batch.decode)
    tokens = batch.tokens
    capacity_tokens = capture.pad(tokens) if capture is not None else tokens
    capacity_rows = rows
    if not batch.prefill and batch.uniform:
        capacity_rows = max(rows, capacity_tokens // (1 + batch.drafts))
    contexts = tuple(s.context for s, _ in batch.prefill) + tuple(s.context for s in batch.decode)
    context = sum(contexts)
    return Execution(
        kind=batch_kind(batch),
        capacity_tokens=capacity_tokens,
        capacity_rows=capacity_rows,
        tokens=tokens,
        rows=rows,
        context=context,
        draft_steps=batch.drafts,
        prompt_tokens=sum(n for _, n in batch.prefill),
        draft_rows=len(batch.decode),
        row_contexts=contexts,
    )


def draw_rounds(running: Sequence[Seq], noise: float, rng: random.Random) -> None:
    """Every decoder without one gets this step's speculative round (true acceptance and
    the drafter's confidence), so policies choosing widths see the signal first."""
    for s in running:
        if s.round is None and s.is_decoding:
            r = s.request
            s.round = draw_round(r.acceptance, r.round_sigma, noise, rng)


class PromptDelivery:
    """The baseline engine's side of the host's prompt-row gather (``host_gather.py``):
    one gather per waiting prompt a free slot can take, ahead of its first chunk."""

    def __init__(self, device: DeviceModel) -> None:
        self.host = HostGather(device)

    def start(self, waiting: Sequence[Seq], free_slots: int, now: float) -> None:
        if not self.host.delivers:
            return
        for s in list(waiting)[: max(0, free_slots)]:
            if s.ready_ms is None:
                s.ready_ms = self.host.gather(s.record, s.request.prompt_tokens, now)

    def is_ready(self, s: Seq, now: float) -> bool:
        """Its prompt rows are on the device. A request whose gather has not started is
        not (issue 39: it was taken as ready, so requests beyond the free slots ran with
        no gather while those being gathered waited)."""
        if not self.host.delivers:
            return True
        return s.ready_ms is not None and s.ready_ms <= now


class LateWatch:
    """Counts requests whose first output is later than a TTFT guard, so a run that can
    no longer meet a p99 guard stops early (overloaded runs would otherwise take long)."""

    def __init__(self, records: Sequence[RequestRecord], guard_ms: float | None, quantile: float):
        self.records = records
        self.guard_ms = guard_ms
        self.allowed = math.floor((1 - quantile) * len(records))

    def exceeded(self, now_ms: float) -> bool:
        if self.guard_ms is None:
            return False
        late = 0
        for r in self.records:
            if r.arrival_ms > now_ms:
                break
            first = r.first_output_ms if r.first_output_ms is not None else now_ms
            if first - r.arrival_ms > self.guard_ms:
                late += 1
                if late > self.allowed:
                    return True
        return False


def run_baseline(
    policy: BaselinePolicy,
    requests: Sequence[SimRequest],
    device: DeviceModel,
    *,
    slots: int,
    seed: int = 0,
    noise_sigma: float = 0.03,
    ttft_guard_ms: float | None = None,
    guard_quantile: float = 0.99,
    check_every: int = 64,
    confidence_noise: float = 0.0,
    end_ms: float = math.inf,
    after: Sequence[int | None] | None = None,
) -> RunResult:
    """Runs ``policy`` over ``requests`` until every request finished or ``end_ms``;
    ``confidence_noise`` is the drafter's confidence calibration
    (``acceptance.CONFIDENCE``) the adaptive policies read. ``after[i]``, when given, is
    the index of the request whose last output request i waits for (None: none)."""
    if after is not None and (len(after) != len(requests) or ttft_guard_ms is not None):
        raise ValueError("after: one entry per request, and no TTFT guard with it")
    followers: dict[int, list[int]] = {}
    for i, before in enumerate(after or ()):
        if before is not None:
            if not 0 <= before < len(requests) or before == i:
                raise ValueError(f"after[{i}] = {before}: not another request's index")
            followers.setdefault(before, []).append(i)
    rng = random.Random(seed)
    rounds = random.Random(seed + 7919)  # acceptance draws, apart from duration noise
    capture = (
        vllm_capture_sizes(slots, policy.drafts, policy.budget)
        if getattr(policy, "padded", False)
        else None
    )
    held = {i for i in range(len(requests)) if after is not None and after[i] is not None}
    order = sorted(
        (i for i in range(len(requests)) if i not in held), key=lambda i: requests[i].arrival_ms
    )
    records = [
        RequestRecord(i, r.arrival_ms, r.prompt_tokens, r.output_tokens)
        for i, r in enumerate(requests)
    ]
    by_arrival = [records[i] for i in order]
    arrivals = deque(Seq(requests[i], records[i]) for i in order)
    watch = LateWatch(by_arrival, ttft_guard_ms, guard_quantile)
    waiting: deque[Seq] = deque()
    running: list[Seq] = []
    executions: list[ExecutionRecord] = []
    now, steps, aborted = 0.0, 0, False
    host = PromptDelivery(device)

    def send(j: int, finished_ms: float) -> None:
        """Request j follows a finished reply: sent then, or at its plan if later."""
        records[j].arrival_ms = max(requests[j].arrival_ms, finished_ms)
        seq = Seq(replace(requests[j], arrival_ms=records[j].arrival_ms), records[j])
        bisect.insort(arrivals, seq, key=lambda s: s.request.arrival_ms)

    while arrivals or waiting or running:
        if now > end_ms:
            break
        while arrivals and arrivals[0].request.arrival_ms <= now:
            waiting.append(arrivals.popleft())
        host.start(waiting, slots - len(running), now)
        ready = [s for s in waiting if host.is_ready(s, now)]
        draw_rounds(running, confidence_noise, rounds)
        batch = policy.schedule(running, ready, slots - len(running))
        if batch is None:
            upcoming = [arrivals[0].request.arrival_ms] if arrivals else []
            upcoming += [s.ready_ms for s in waiting if s.ready_ms and s.ready_ms > now]
            if not upcoming:
                break  # nothing can ever run (cannot happen with positive lengths)
            now = max(now, min(upcoming))
            continue
        for s, _ in batch.prefill:
            if s.record.admitted_ms is None:
                s.record.admitted_ms = now
                waiting.remove(s)
                running.append(s)
        e = batch_execution(batch, capture)
        idle = sum(1 for s in running if s.is_decoding) - len(batch.decode)
        duration = device.duration_ms(e) * math.exp(rng.gauss(0.0, noise_sigma))
        start, now = now, now + duration
        executions.append(
            ExecutionRecord(
                start,
                now,
                e.kind.value,
                f"{policy.name}:{e.kind.value}",
                rows=e.rows,
                tokens=e.tokens,
                prompt_tokens=sum(n for _, n in batch.prefill),
                decoders=len(batch.decode),
                width=max((batch.width(i) for i in range(len(batch.decode))), default=0),
                idle_decoders=idle,
            )
        )
        for s, n in batch.prefill:
            if s.record.prompt_start_ms is None:
                s.record.prompt_start_ms = start
            s.prefilled += n
            if s.prompt_left == 0:
                s.generated += 1
                s.record.deliver(now, 1, s.request.output_tokens - s.generated)
        accepted = []
        for i, s in enumerate(batch.decode):
            drafts = batch.width(i) - 1
            s.record.verified(drafts + 1)
            got = s.round.accepted(drafts, rounds) if s.round is not None else 0
            s.round = None
            accepted.append(got)
            count = min(1 + got, s.request.output_tokens - s.generated)
            s.generated += count
            s.record.deliver(now, count, s.request.output_tokens - s.generated)
        policy.observe(batch, accepted)
        for s in running:
            if s.record.finish_ms is not None:
                for j in followers.get(s.record.id, ()):
                    send(j, now)
        running = [s for s in running if s.record.finish_ms is None]
        steps += 1
        if steps % check_every == 0 and watch.exceeded(now):
            aborted = True
            break
    return RunResult(
        policy.name, records, executions, min(now, end_ms), slots, {"aborted": aborted}
    )
