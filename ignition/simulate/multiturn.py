"""Multi-turn chat with checkpoint retention on and off, on a simulated device.

``ignition simulate --conversations N --turns K --snapshot-rows 0,4,16`` runs the real
engine loop, Helios and the checkpoint cache (everything of ``ignition serve`` but the
model) against a device model: the worker below times every frame with
``devices.py`` and emits a planned token sequence instead of sampling, so every run of
one workload generates the same text and only scheduling and prefill work differ.

The workload is ``workloads.conversations`` made concrete: each conversation's first
prompt and each later user message are random token ids ending in a two-token
generation prompt; turn k re-sends the whole history (every earlier prompt, the
planned reply and an end-of-turn token) with the chat's exact message endpoints,
which is where retention anchors its checkpoints. A turn is sent at its planned
(open-loop) arrival or, if the previous reply is not finished by then, when it is:
a user cannot answer a reply they have not seen. TTFT counts from that sending.

Snapshot and restore copy a whole snapshot row (the recurrent state plus every page
of a slot's context capacity, as ``compiler/state_ops.py`` does), timed as a memory
copy at the device's bandwidth when the model states one; initialization (a fresh
request's zero state, a prerequisite Helios schedules like a restore) writes the
recurrent state alone.
"""

from __future__ import annotations

import heapq
import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from ignition.components.catalog import Catalog
from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.components.state_programs import state_programs
from ignition.helios import (
    CompletionRecord,
    ExecutionTiming,
    LaneRole,
    PolicyConfig,
    RequestHandle,
    Resources,
    Scheduler,
)
from ignition.runtime.executors.frames import FrameResult
from ignition.runtime.loop.engine import Engine
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from ignition.runtime.retention.checkpoints import CheckpointCache
from ignition.simulate.devices import DeviceError, DeviceModel, H200Roofline, execution_of
from ignition.simulate.workloads import WorkloadError, conversations

NS_PER_MS = 1_000_000
GENERATION_PROMPT = (1, 2)  # what a chat template appends after the last user message
END_OF_TURN = 3
NOMINAL_CONTEXT_PER_ROW = 1024
STATE_COPY_LAUNCH_MS = 0.01


@dataclass(frozen=True)
class MultiTurnSpec:
    conversations: int = 16
    turns: int = 4
    rate_per_s: float = 4.0  # conversations starting per second
    first_prompt: int = 1024
    turn_prompt: int = 128
    output_tokens: int = 64
    think_ms: float = 1000.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.first_prompt < 3 or self.turn_prompt < 3 or self.output_tokens < 1:
            raise WorkloadError(
                f"conversations: first prompt {self.first_prompt}, turn prompt "
                f"{self.turn_prompt} need at least 3 tokens and output {self.output_tokens} 1"
            )
        if not math.isfinite(self.think_ms) or self.think_ms < 0:
            raise WorkloadError(f"think_ms = {self.think_ms!r}: must be finite and nonnegative")


@dataclass
class Turn:
    conversation: int
    index: int
    planned_ns: int
    user: tuple[int, ...]  # this turn's new message, generation prompt included
    reply: tuple[int, ...]  # the planned output
    prompt: tuple[int, ...] = ()
    ends: tuple[int, ...] = ()
    history: int = 0  # prompt tokens sent before (what a retaining server may hold)
    sent_ns: int = -1
    first_token_ns: int = -1
    finish_ns: int = -1
    cached: int = 0
    output: tuple[int, ...] = ()

    @property
    def name(self) -> str:
        return f"c{self.conversation}t{self.index}"


def build_turns(spec: MultiTurnSpec) -> list[list[Turn]]:
    """Per conversation, its turns with their messages and planned replies."""
    requests = conversations(
        spec.conversations,
        spec.turns,
        rate_per_s=spec.rate_per_s,
        first_prompt=spec.first_prompt,
        turn_prompt=spec.turn_prompt,
        output_tokens=spec.output_tokens,
        think_ms=spec.think_ms,
        seed=spec.seed,
    )
    rng = random.Random(spec.seed + 1)
    out: list[list[Turn]] = [[] for _ in range(spec.conversations)]
    for r in sorted(requests, key=lambda r: (r.conversation, r.turn)):
        size = spec.first_prompt if r.turn == 0 else spec.turn_prompt
        body = tuple(rng.randrange(100, 30000) for _ in range(size - len(GENERATION_PROMPT)))
        reply = tuple(rng.randrange(100, 30000) for _ in range(r.output_tokens))
        planned = round(r.arrival_ms * NS_PER_MS)
        user = body + GENERATION_PROMPT
        out[r.conversation].append(Turn(r.conversation, r.turn, planned, user, reply))
    for turns in out:
        history: tuple[int, ...] = ()
        ends: tuple[int, ...] = ()
        for t in turns:
            t.history = len(history)
            t.prompt = history + t.user
            t.ends = (*ends, len(t.prompt) - len(GENERATION_PROMPT))
            history = (*t.prompt, *t.reply, END_OF_TURN)
            ends = (*t.ends, len(history))
    return out


def state_copy_ms(device: DeviceModel, d: Descriptor, slot_capacity_tokens: int) -> float:
    """One snapshot-row copy: read and write the recurrent state and a slot's pages; an
    initialization writes zeros over the recurrent state only."""
    if isinstance(device, H200Roofline):
        if d.kind is GraphKind.INIT:
            moved = device.state_bytes_per_row
        else:
            moved = 2 * (
                device.state_bytes_per_row + slot_capacity_tokens * device.kv_bytes_per_token
            )
        return STATE_COPY_LAUNCH_MS + 1e3 * moved / (device.bandwidth_fraction * device.bandwidth)
    try:
        return device.duration_ms(execution_of(d, 0, 1, slot_capacity_tokens))
    except DeviceError as err:
        raise DeviceError(f"{device.name}: cannot time the {d.kind.value} copy ({err})") from None


class Clock:
    def __init__(self) -> None:
        self.now_ns = 0
        self.busy_until_ns = 0


class SimulatedWorker:
    """The engine's worker on a device model: frames run one after another on one queue
    and emit each request's planned reply."""

    def __init__(
        self,
        device: DeviceModel,
        clock: Clock,
        replies: dict[str, tuple[int, ...]],
        slot_capacity_tokens: int,
    ) -> None:
        self.device = device
        self.clock = clock
        self.replies = replies
        self.slot_capacity_tokens = slot_capacity_tokens
        self.prefill_tokens = 0
        self._emitted: dict[RequestHandle, int] = {}
        self._context: dict[RequestHandle, int] = {}

    def duration_ns(self, d: Descriptor, tokens: int, rows: int, context: int) -> int:
        if d.kind in (GraphKind.SNAPSHOT, GraphKind.RESTORE, GraphKind.INIT):
            ms = rows * state_copy_ms(self.device, d, self.slot_capacity_tokens)
        else:
            ms = self.device.duration_ms(execution_of(d, tokens, rows, context))
        return max(1, round(ms * NS_PER_MS))

    def nominal_ns(self, d: Descriptor) -> int:
        """A full graph at a nominal cached context: what a build's tuning measures."""
        rows = d.batch_capacity
        context = 0 if d.kind is GraphKind.PREFILL else rows * NOMINAL_CONTEXT_PER_ROW
        return self.duration_ns(d, d.packed_capacity + d.prefill_capacity, rows, context)

    def _token(self, handle: RequestHandle, live) -> tuple[int, ...]:
        reply = self.replies[live.request.request_id]
        i = self._emitted.get(handle, 0)
        self._emitted[handle] = i + 1
        return (reply[i],) if i < len(reply) else (reply[-1],)

    def launch(self, plan, fence, live):
        records, tokens, context = [], 0, 0
        for lane in plan.lanes:
            handle = lane.handle
            context += self._context.get(handle, 0)
            if lane.role is LaneRole.PROMPT:
                self.prefill_tokens += lane.num_prompt_tokens
                tokens += lane.num_prompt_tokens
                self._context[handle] = self._context.get(handle, 0) + lane.num_prompt_tokens
                ids = self._token(handle, live[handle]) if lane.max_advance_tokens else ()
                records.append(CompletionRecord(handle, lane.num_prompt_tokens, ids))
            elif lane.role is LaneRole.DECODE:
                tokens += lane.query_length
                self._context[handle] = self._context.get(handle, 0) + 1
                records.append(CompletionRecord(handle, 0, self._token(handle, live[handle])))
            else:
                if lane.role is LaneRole.RESTORE:
                    self._context[handle] = lane.checkpoint_tokens
                records.append(CompletionRecord(handle))
        device_ns = self.duration_ns(plan.descriptor, tokens, len(plan.lanes), context)
        start = max(self.clock.now_ns, self.clock.busy_until_ns)
        self.clock.busy_until_ns = start + device_ns
        timing = ExecutionTiming(device_ns, self.clock.busy_until_ns - self.clock.now_ns)
        return self.clock.busy_until_ns, FrameResult(tuple(records), timing)

    def wait(self, pending):
        end, result = pending
        self.clock.now_ns = max(self.clock.now_ns, end)
        return result

    def release(self, handle: RequestHandle) -> None:
        self._emitted.pop(handle, None)
        self._context.pop(handle, None)

    def carry_history(self, old: RequestHandle, new: RequestHandle) -> None:
        """The simulated device keeps no sampling history (and serves no images)."""


class _Ids:
    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return "".join(chr(0x4E00 + i % 2000) for i in ids)


@dataclass(frozen=True)
class RetentionRun:
    snapshot_rows: int
    turns: int
    first_turn_ttft_ms: tuple[float, ...]
    later_turn_ttft_ms: tuple[float, ...]
    later_prompt_tokens: int
    later_history_tokens: int
    later_cached_tokens: int
    prefill_tokens: int
    restores: int
    evictions: int
    makespan_ms: float
    # every turn's mean time per output token after its first: what the decoders paid
    tpot_ms: tuple[float, ...] = ()
    policy: str = "helios"  # a baseline's run retains nothing (``conversation.py``)
    outputs: dict[str, tuple[int, ...]] = field(repr=False, compare=False, default_factory=dict)

    @property
    def cached_share(self) -> float:
        """Cached tokens over the later turns' whole prompts."""
        return self.later_cached_tokens / max(1, self.later_prompt_tokens)

    @property
    def history_share(self) -> float:
        """Cached tokens over what earlier turns had sent (the most a cache could hold)."""
        return self.later_cached_tokens / max(1, self.later_history_tokens)

    def to_json(self) -> dict:
        later = self.later_turn_ttft_ms
        return {
            "policy": self.policy,
            "snapshot_rows": self.snapshot_rows,
            "turns": self.turns,
            "first_turn_ttft_mean_ms": _mean(self.first_turn_ttft_ms),
            "later_turn_ttft_mean_ms": _mean(later),
            "later_turn_ttft_p50_ms": _quantile(later, 0.5),
            "later_turn_ttft_p90_ms": _quantile(later, 0.9),
            "cached_share_of_prompt": self.cached_share,
            "cached_share_of_history": self.history_share,
            "prefill_tokens": self.prefill_tokens,
            "restores": self.restores,
            "evictions": self.evictions,
            "makespan_ms": self.makespan_ms,
            "tpot_mean_ms": _mean(self.tpot_ms),
            "tpot_p90_ms": _quantile(self.tpot_ms, 0.9),
        }


def _mean(xs: Sequence[float]) -> float:
    return statistics.fmean(xs) if xs else math.nan


def _quantile(xs: Sequence[float], q: float) -> float:
    if not xs:
        return math.nan
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def run_retention(
    spec: MultiTurnSpec,
    snapshot_rows: int,
    catalog: Catalog,
    *,
    slots: int,
    device: DeviceModel,
    policy: PolicyConfig | None = None,
    max_context_tokens: int = 16384,
    preseed_costs: bool = True,
    initialize: bool = True,
    payoff: bool = True,
) -> RetentionRun:
    """One run of the workload with ``snapshot_rows`` retained-checkpoint rows (0: off).

    ``initialize``: fresh requests start through the init program, as in the runtime
    (False: their state is zeroed outside Helios, at no device time, the former way).
    ``payoff``: the checkpoint cache's pay-off rule (runtime/retention/payoff.py); False
    restores and captures whatever the allowance admits.
    """
    conversations_ = build_turns(spec)
    turns = [t for c in conversations_ for t in c]
    longest = max(len(t.prompt) + len(t.reply) for t in turns)
    if longest + 1 > max_context_tokens:
        raise WorkloadError(
            f"conversations: a turn reaches {longest} tokens, over the context "
            f"{max_context_tokens}; fewer turns or shorter messages"
        )
    clock = Clock()
    catalog = replace(catalog, descriptors=(*catalog.descriptors, *state_programs(initialize)))
    scheduler = Scheduler(
        catalog, policy or PolicyConfig(), resources=Resources(num_request_slots=slots)
    )
    worker = SimulatedWorker(device, clock, {t.name: t.reply for t in turns}, max_context_tokens)
    if preseed_costs:
        programs = scheduler.programs()
        for d in (*programs.inference, *programs.state):
            scheduler.seed_cost(d, worker.nominal_ns(d))
    engine = Engine(
        scheduler,
        worker,
        _Ids(),
        max_context_tokens=max_context_tokens,
        clock_ns=lambda: clock.now_ns,
        checkpoints=CheckpointCache(snapshot_rows, payoff=payoff),
        max_waiting=len(turns) + 1,
    )
    ready: list[tuple[int, int, int]] = []  # (send time, conversation, turn index)
    for c in conversations_:
        heapq.heappush(ready, (c[0].planned_ns, c[0].conversation, 0))

    def sink_for(turn: Turn) -> Callable:
        def sink(chunk) -> None:
            if chunk.token_ids and turn.first_token_ns < 0:
                turn.first_token_ns = clock.now_ns
            turn.output += chunk.token_ids
            turn.cached = chunk.num_cached_tokens
            if chunk.finish_reason:
                turn.finish_ns = clock.now_ns
                following = conversations_[turn.conversation][turn.index + 1 :]
                if following:
                    nxt = following[0]
                    heapq.heappush(
                        ready, (max(nxt.planned_ns, clock.now_ns), nxt.conversation, nxt.index)
                    )

        return sink

    idle_steps = 0
    while ready or engine.has_work:
        while ready and ready[0][0] <= clock.now_ns:
            _, c, k = heapq.heappop(ready)
            turn = conversations_[c][k]
            turn.sent_ns = clock.now_ns
            sampling = SamplingParams(max_tokens=len(turn.reply), temperature=0.0, ignore_eos=True)
            engine.submit(
                GenerationRequest(turn.name, turn.prompt, sampling, turn.ends), sink_for(turn)
            )
        progressed = engine.step()
        if not engine.has_work and ready:
            clock.now_ns = max(clock.now_ns, ready[0][0])
        idle_steps = 0 if progressed else idle_steps + 1
        if idle_steps > 1000:
            raise RuntimeError("the simulated engine stopped making progress")
    for t in turns:
        if t.output != t.reply:
            raise RuntimeError(f"{t.name}: the engine did not deliver its planned reply")
    later = [t for t in turns if t.index > 0]
    stats = engine.stats.snapshot()
    return RetentionRun(
        snapshot_rows=snapshot_rows,
        turns=len(turns),
        first_turn_ttft_ms=tuple(
            (t.first_token_ns - t.sent_ns) / NS_PER_MS for t in turns if t.index == 0
        ),
        later_turn_ttft_ms=tuple((t.first_token_ns - t.sent_ns) / NS_PER_MS for t in later),
        later_prompt_tokens=sum(len(t.prompt) for t in later),
        later_history_tokens=sum(t.history for t in later),
        later_cached_tokens=sum(t.cached for t in later),
        prefill_tokens=worker.prefill_tokens,
        restores=stats.executions_by_kind.get("restore", 0),
        evictions=stats.prefix_cache_evictions,
        makespan_ms=clock.now_ns / NS_PER_MS,
        tpot_ms=tuple(
            (t.finish_ns - t.first_token_ns) / NS_PER_MS / (len(t.output) - 1)
            for t in turns
            if len(t.output) > 1
        ),
        outputs={t.name: t.output for t in turns},
    )


def parse_rows_list(text: str) -> list[int]:
    """``0,4,16``: snapshot row counts to compare (0 is retention off)."""
    try:
        rows = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise WorkloadError(
            f"--snapshot-rows {text!r}: expected comma-separated row counts"
        ) from None
    if not rows or any(r < 0 for r in rows):
        raise WorkloadError(f"--snapshot-rows {text!r}: needs nonnegative row counts")
    return rows


def retention_table(runs: Sequence[RetentionRun], title: str):
    from rich.table import Table

    table = Table(title=title)
    columns = (
        "policy",
        "snapshot rows",
        "turn-1 TTFT mean",
        "later TTFT mean",
        "p50",
        "p90",
        "cached / prompt",
        "cached / history",
        "prefill tokens",
        "restores",
        "evictions",
        "TPOT mean",
        "makespan s",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "policy" else "right")
    for run in runs:
        j = run.to_json()
        retains = run.policy.startswith("helios")
        rows = str(run.snapshot_rows) + (" (off)" if run.snapshot_rows == 0 else "")
        table.add_row(
            run.policy,
            rows if retains else "- (none)",
            f"{j['first_turn_ttft_mean_ms']:.1f}",
            f"{j['later_turn_ttft_mean_ms']:.1f}",
            f"{j['later_turn_ttft_p50_ms']:.1f}",
            f"{j['later_turn_ttft_p90_ms']:.1f}",
            f"{run.cached_share:.1%}",
            f"{run.history_share:.1%}",
            str(run.prefill_tokens),
            str(run.restores),
            str(run.evictions),
            f"{j['tpot_mean_ms']:.2f}",
            f"{run.makespan_ms / 1e3:.2f}",
        )
    return table
