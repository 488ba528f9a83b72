"""The worker: executes a ScheduledPlan on its prepared program and reports completion.

For each plan it fills the program's host staging (rows in lane order, packed
offsets are the host prefix sums of the rows' query lengths), issues one upload
per bound buffer, and launches the program without waiting for the device:
``launch`` returns while the frame runs, so the engine plans and queues the next
frame meanwhile, and ``wait`` synchronizes, reads the device interval and turns
the outputs into Helios completion records. Each row's role is checked against the program
before anything is written: a prompt lane needs a program with prompt capacity,
a decode lane a row width it fits in.

Host-side it tracks only what the plan implies (prompt cursors, a page upper
bound); pending decode tokens stay on the device (see compiler.programs), which
is what allows a second decode frame to be launched before the first one's
outputs are read. The same holds for the sampling history behind penalties,
logit bias and min_tokens (model.logits_processing): the frame carrying a
request's first prompt chunk resets its slot's row from workspace buffers (a
restore rebuilds it from the restored tokens instead), and the programs count
emitted tokens themselves. Raw logprobs are program outputs,
read on the host only for the requests that asked for them.

Prompt logprobs are scored after the program, in the same launch (stream-ordered before any
later frame can overwrite them): every program with a prompt lane writes the lane's final
hidden states to one workspace buffer, and
:func:`ignition.model.prompt_logprobs.score_positions` reduces them to [N, K] values for a
prompt lane whose request asked, and only then.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from ignition.compiler.graph import InflightRun, PreparedProgram, launch, map_tensors
from ignition.compiler.ple_input import PleRowsInput, stage_rows
from ignition.compiler.ple_staging import PleStaging
from ignition.compiler.programs import Program
from ignition.compiler.staging import HostFrame
from ignition.compiler.state_ops import StateOperations
from ignition.compiler.vision_program import VisionRunner
from ignition.compiler.workspace import RoundProgramInputs
from ignition.components.catalog import GraphKind
from ignition.helios import (
    CompletionRecord,
    ConfidenceSidecar,
    ExecutionTiming,
    Fence,
    LaneRole,
    LaneWork,
    RequestHandle,
    ScheduledPlan,
)
from ignition.model.logits_processing import MAX_LOGIT_BIAS, MAX_STOP_IDS
from ignition.model.prompt_logprobs import PromptScores
from ignition.model.sampling import INVALID_TOKEN
from ignition.model.state import ModelState
from ignition.runtime.engine import LiveRequest
from ignition.runtime.frames import FrameResult
from ignition.runtime.grammar import GRAMMAR_REJECTED, GrammarState
from ignition.runtime.ple import Delivery, FrameDelivery
from ignition.runtime.requests import PromptLogprob, TokenLogprob
from ignition.runtime.resources import SlotResources
from ignition.runtime.vision_binding import (
    ImageBindingError,
    ImageEncoder,
    RequestVision,
)

# What a request whose row emitted INVALID_TOKEN is told (model.sampling).
NON_FINITE_MESSAGE = (
    "sampling failed: this request's token distribution was not finite (NaN or inf logits "
    "after its penalties, bias and temperature); other requests were not affected"
)

# The state programs of compiler.state_ops: initialization, restore and snapshots.
STATE_COPY_KINDS = (GraphKind.SNAPSHOT, GraphKind.RESTORE, GraphKind.INIT)


class WorkerError(RuntimeError):
    """A plan the prepared programs cannot execute (a runtime contract violation)."""


@dataclass
class _Launched:
    fence: Fence
    plan: ScheduledPlan
    program: Program
    inflight: InflightRun  # outputs readable after ``inflight.wait()``
    launched_ns: int  # perf_counter_ns when the frame was enqueued
    lanes: tuple[LaneWork, ...]
    eos: tuple[frozenset[int], ...]
    num_logprobs: tuple[int | None, ...] = ()  # per lane: alternatives asked for, None = none
    grammars: tuple[GrammarState | None, ...] = ()  # per lane: its matcher, None = none
    prompt_job: _PromptJob | None = None
    prompt_scores: PromptScores | None = None  # device values, readable after the wait
    # PLE rows delivered through the mailbox, and how long the frame waited for them inside
    # its interval (runtime/ple/delivery.py)
    ple_deliveries: tuple[Delivery, ...] = ()
    ple_wait_ns: int = 0
    ple_inside: tuple[Delivery, ...] = ()  # rows the program itself asked for (drafts, ...)


@dataclass(frozen=True)
class _PromptJob:
    """The prompt positions a frame scores: its prompt lane's chunk positions ``start`` ..
    ``start + len(targets) - 1``, each read at the prompt token after it."""

    handle: RequestHandle
    start: int
    targets: tuple[int, ...]
    num_top: int


# (final-normed hidden [N, H], target ids [N], alternatives) -> device scores
PromptScorer = Callable[[torch.Tensor, torch.Tensor, int], PromptScores]


@dataclass
class _StateLaunched:
    """A state-operation frame: copies run at launch (they are tiny indexed copies)."""

    fence: Fence
    plan: ScheduledPlan
    device_ns: int
    wall_ns: int


def request_seed(request_id: str, seed: int | None) -> int:
    """A request's sampling seed: the one asked for, or a stable hash of its id."""
    if seed is not None:
        return int(seed) & ((1 << 63) - 1)
    return int.from_bytes(hashlib.blake2b(request_id.encode(), digest_size=8).digest()) >> 1


class ModelWorker:
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
    ) -> None:
        self.state = state
        # The prompt-logprobs stage (None: this worker cannot serve prompt logprobs).
        self.score_prompt = score_prompt
        # The store's first rows the checkpoint cache retains into (the rest are private
        # vision-window rows); resolved once per rank at assembly.
        self.snapshot_rows = snapshot_rows
        self.programs = programs
        self.resources = resources
        self.eos_token_ids = eos_token_ids
        # Snapshot/restore programs: the prerequisites and terminal work Helios schedules.
        self.state_ops = state_ops
        # The vision tower (prepared vision programs) for requests with images, and the
        # prepared feature storage of each slot's active vision window [slots, C, hidden].
        self.encode_images = encode_images
        self.feature_storage = feature_storage
        self._vision: dict[RequestHandle, RequestVision] = {}
        self._prompt_cursor: dict[RequestHandle, int] = {}
        self._overrun: set[RequestHandle] = set()  # committed past the published output
        # Called with the fence once a program frame is staged, just before it runs: tensor
        # parallel ranks agree there that every rank staged it (ignition.distributed.ranks).
        self.before_run: Callable[[Fence], None] | None = None
        # Requests whose device sampling history (penalties, bias, min_tokens) has been
        # reset: by the frame carrying their first prompt chunk.
        self._begun: set[RequestHandle] = set()
        # Requests whose slot state an init or restore lane started (no eager reset).
        self._started: set[RequestHandle] = set()
        # The PLE n-gram rows' delivery (None: no table, or one the program gathers itself).
        self.ple: FrameDelivery | None = None
        self._ple_staging: PleStaging | None = None  # CUDA only (compiler.ple_staging)
        # Program frames launched and not yet read, per request: while one is, the request's
        # pending token lives only on the device and its PLE rows are not known at launch.
        self._unread: dict[RequestHandle, int] = {}

    def attach_ple(self, delivery: FrameDelivery) -> None:
        """Deliver the n-gram table's rows (host / disk residency): known rows are staged
        into every program's PLE input, the rest resolve through the in-program mailbox."""
        self.ple = delivery
        for program, _ in self.programs.values():
            staged: PleRowsInput | None = getattr(program.inputs, "ple", None)
            if staged is not None:
                staged.is_enabled = True
                staged.resolve = delivery.resolve_inside
                if staged.ids[0].is_cuda and self._ple_staging is None:
                    # two queued frames: known rows through alternating pinned sets (the
                    # programs share one PLE input, so one staging serves them all)
                    self._ple_staging = PleStaging(staged)

    # -- Worker protocol -----------------------------------------------------------

    def launch(
        self, plan: ScheduledPlan, fence: Fence, live: dict[RequestHandle, LiveRequest]
    ) -> _Launched:
        if plan.descriptor.kind in STATE_COPY_KINDS:
            return self._launch_state(plan, fence, live)
        if plan.descriptor.kind is GraphKind.VISION:
            return self._launch_vision(plan, fence, live)
        name = plan.descriptor.name
        if name not in self.programs:
            raise WorkerError(f"fence {fence.value}: no prepared program {name}")
        program, prepared = self.programs[name]
        self._validate_roles(plan, program)
        # Known rows go to the mailbox first, so the host thread resolves them while this
        # frame is staged (and, on a GPU, while the previous frame still runs).
        deliveries = () if self.ple is None else tuple(self._publish_rows(plan, live))
        try:
            launched = self._launch_program(plan, fence, live, program, prepared, deliveries)
        except BaseException:
            if self.ple is not None:  # a frame that never ran hands its staging back
                self.ple.discard(deliveries)
            raise
        for lane in plan.lanes:
            self._unread[lane.handle] = self._unread.get(lane.handle, 0) + 1
        return launched

    def _launch_program(
        self,
        plan: ScheduledPlan,
        fence: Fence,
        live: dict[RequestHandle, LiveRequest],
        program: Program,
        prepared: PreparedProgram,
        deliveries: tuple[Delivery, ...],
    ) -> _Launched:
        job = self._prompt_job(plan, live)
        frame = program.stage()
        offset = 0  # packed offset of the next row: the host prefix sum of query lengths
        eos, num_logprobs, grammars = [], [], []
        for row, lane in enumerate(plan.lanes):
            request = live[lane.handle]
            offset += self._bind_row(program, frame, row, offset, lane, request)
            stops = request.request.sampling.ignore_eos
            eos.append(frozenset() if stops else self.eos_token_ids)
            num_logprobs.append(request.request.sampling.logprobs)
            grammars.append(_bind_grammar(program, frame, row, request))
        program.upload(frame)
        if self.before_run is not None:
            self.before_run(fence)
        launched_ns = time.perf_counter_ns()
        ple_wait_ns = 0
        if deliveries:
            # the program's PLE layer cannot start without them
            rows = self.ple.await_rows(deliveries)
            staged = getattr(program.inputs, "ple", None)
            _stage_known_rows(staged, deliveries, rows, self.ple.layer_rows, self._ple_staging)
            ple_wait_ns = time.perf_counter_ns() - launched_ns
        scored: list[PromptScores] = []

        def keep(out):
            # The static outputs belong to the program, and a second queued frame of the same
            # program would overwrite them before this frame is read: keep a stream-ordered
            # copy; score the prompt hidden states now, before any later frame rewrites them.
            if job is not None:
                scored.append(self._score(program, job))
            return map_tensors(out, lambda t: t.clone())

        inflight = launch(prepared, snapshot=keep)
        inside = self.ple.take_inside() if self.ple is not None else ()
        return _Launched(
            fence, plan, program, inflight, launched_ns, plan.lanes, tuple(eos),
            tuple(num_logprobs), tuple(grammars), job, scored[0] if scored else None,
            deliveries, ple_wait_ns, inside,
        )  # fmt: skip

    def _publish_rows(self, plan: ScheduledPlan, live: dict[RequestHandle, LiveRequest]):
        prompts = {
            lane.handle: live[lane.handle].prompt_ids
            for lane in plan.lanes
            if lane.role is LaneRole.PROMPT
        }
        return self.ple.publish(plan, prompts, self._prompt_cursor, self._read_pending(plan, live))

    def _read_pending(
        self, plan: ScheduledPlan, live: dict[RequestHandle, LiveRequest]
    ) -> dict[RequestHandle, tuple[int, ...]]:
        """Decode lanes whose pending token the host has read: the request's token history
        (prompt, then output, replayed output included), ending with that token. A request
        with a frame still unread, or whose device state ran past its reported output,
        keeps its pending token on the device: the program's mailbox resolves those rows."""
        known = {}
        for lane in plan.lanes:
            request = live[lane.handle]
            if (
                lane.role is LaneRole.DECODE
                and request.output_ids
                and not self._unread.get(lane.handle)
                and lane.handle not in self._overrun
            ):
                known[lane.handle] = (*request.request.prompt_ids, *request.output_ids)
        return known

    def _score(self, program: Program, job: _PromptJob) -> PromptScores:
        """The prompt-logprobs stage over the hidden states the program just kept."""
        hidden = program.prompt_hidden
        if hidden is None or self.score_prompt is None:
            raise WorkerError(f"{program.descriptor.name}: no prompt hidden states to score")
        targets = torch.tensor(job.targets, dtype=torch.int64)
        if hidden.is_cuda:  # a pageable copy would block the host until the frame ends
            targets = targets.pin_memory().to(hidden.device, non_blocking=True)
        return self.score_prompt(hidden[: len(job.targets)], targets, job.num_top)

    def _prompt_job(
        self, plan: ScheduledPlan, live: dict[RequestHandle, LiveRequest]
    ) -> _PromptJob | None:
        """What this frame's prompt lane scores, if its request asked for prompt logprobs:
        every chunk position but the prompt's last (that one predicts the first output)."""
        lane = next((x for x in plan.lanes if x.role is LaneRole.PROMPT), None)
        if lane is None:
            return None
        request = live[lane.handle]
        num_top = request.request.sampling.prompt_logprobs
        if num_top is None:
            return None
        if self.score_prompt is None:
            raise WorkerError(f"{lane.handle}: prompt logprobs, and no scoring stage")
        start = self._prompt_cursor.get(lane.handle, 0)
        end = min(start + lane.num_prompt_tokens, len(request.request.prompt_ids) - 1)
        if end <= start:
            return None
        return _PromptJob(lane.handle, start, request.prompt_ids[start + 1 : end + 1], num_top)

    def wait(self, launched: _Launched | _StateLaunched) -> FrameResult:
        if isinstance(launched, _StateLaunched):
            records = tuple(CompletionRecord(lane.handle) for lane in launched.plan.lanes)
            return FrameResult(records, ExecutionTiming(launched.device_ns, launched.wall_ns))
        device_ns = launched.inflight.wait()
        wall_ns = time.perf_counter_ns() - launched.launched_ns
        self._mark_read(launched.lanes)
        readiness, stall_ns = (), 0
        in_graph = self.ple is not None and self.ple.in_graph is not None
        if launched.ple_deliveries or launched.ple_inside or in_graph:
            readiness, stall_ns = self.ple.finish(launched.ple_deliveries, launched.ple_inside)
            if self.ple.inside_interval:  # CPU: the program's interval holds its wait
                device_ns += launched.ple_wait_ns
        stall_ns = min(stall_ns, device_ns)
        timing = ExecutionTiming(max(1, device_ns), wall_ns, readiness_stall_ns=stall_ns)
        if launched.program.is_round:
            return replace(self._round_result(launched, timing), readiness=readiness)
        return replace(self._step_result(launched, timing), readiness=readiness)

    def carry_history(self, old: RequestHandle, new: RequestHandle) -> None:
        """``new`` continues ``old``'s logical request (its next vision window): it keeps
        the sampling history instead of starting one at its first prompt chunk. Called
        right after ``old`` is released and ``new`` admitted, before any frame could let
        another request begin in ``old``'s slot."""
        history = next((p.history for p, _ in self.programs.values() if p.history), None)
        if history is not None and old.slot != new.slot:
            history.copy_row(old.slot, new.slot)
        self._begun.add(new)

    def _mark_read(self, lanes: tuple[LaneWork, ...]) -> None:
        for lane in lanes:
            left = self._unread.get(lane.handle, 0) - 1
            if left > 0:
                self._unread[lane.handle] = left
            else:
                self._unread.pop(lane.handle, None)

    def release(self, handle: RequestHandle) -> None:
        self._unread.pop(handle, None)
        self._vision.pop(handle, None)
        self._prompt_cursor.pop(handle, None)
        self._overrun.discard(handle)
        self._begun.discard(handle)
        self._started.discard(handle)
        self.resources.release(handle.slot)

    def _launch_state(
        self, plan: ScheduledPlan, fence: Fence, live: dict[RequestHandle, LiveRequest]
    ) -> _StateLaunched:
        """Initialize fresh slots, restore rows into fresh slots, or copy slots into their
        snapshot rows.

        The engine names each lane's row (``LiveRequest.state_row``); a capture without
        one (aliased, or skipped because its cost expired) copies nothing.
        """
        if self.state_ops is None:
            raise WorkerError(f"fence {fence.value}: no prepared state operations")
        began = time.perf_counter_ns()
        device_ns = 0
        for lane in plan.lanes:
            row = live[lane.handle].state_row
            slot = lane.handle.slot
            if lane.role is LaneRole.INIT:
                self.resources.begin(slot, reset_state=False)
                device_ns += self.state_ops.initialize(slot)
                self._started.add(lane.handle)
            elif lane.role is LaneRole.RESTORE:
                if row is None:
                    raise WorkerError(f"fence {fence.value}: restore of {lane.handle} has no row")
                self.resources.begin(slot, reset_state=False)  # the restore writes it
                self.resources.reserve(slot, lane.checkpoint_tokens, lookahead=1)
                # The restore writes into the pages the *device* table names: the ones just
                # assigned on the host must reach it first, or the prefix lands in the
                # previous occupant's pages (or the scratch page).
                self._sync_page_table()
                device_ns += self.state_ops.restore(slot, row)
                self._prompt_cursor[lane.handle] = lane.checkpoint_tokens
                self._restore_history(lane, live[lane.handle])
            elif row is not None:
                # Capture only a state whose length is exactly the checkpoint's (known on
                # the host: launching never reads the device).
                if lane.role is LaneRole.TERMINAL and lane.handle in self._overrun:
                    live[lane.handle].state_ok = False
                    continue
                self._sync_page_table()
                device_ns += self.state_ops.snapshot(slot, row)
        return _StateLaunched(fence, plan, device_ns, time.perf_counter_ns() - began)

    def _launch_vision(
        self, plan: ScheduledPlan, fence: Fence, live: dict[RequestHandle, LiveRequest]
    ) -> _StateLaunched:
        """Encode each lane's active window of images on the plan's vision program into
        its slot's feature storage (the vision prerequisite Helios scheduled)."""
        name = plan.descriptor.name
        if name not in self.programs or self.feature_storage is None:
            raise WorkerError(f"fence {fence.value}: no prepared vision program {name}")
        encoder = VisionRunner([self.programs[name]])
        began = time.perf_counter_ns()
        for lane in plan.lanes:
            request = live[lane.handle]
            if request.request.images is None:
                raise WorkerError(f"fence {fence.value}: vision work for a text request")
            try:
                self._vision[lane.handle] = RequestVision.encode(
                    request.request.images,
                    request.vision_window,
                    encoder,
                    self.feature_storage[lane.handle.slot],
                )
            except (ImageBindingError, ValueError) as err:
                raise WorkerError(f"{name}: {err}") from None
        if self.feature_storage.is_cuda:
            torch.cuda.synchronize(self.feature_storage.device)
        elapsed = time.perf_counter_ns() - began
        return _StateLaunched(fence, plan, max(1, elapsed), elapsed)

    def _sync_page_table(self) -> None:
        mirror = self.resources.page_table
        if mirror is not None:
            mirror.sync()

    # -- inputs --------------------------------------------------------------------

    def _validate_roles(self, plan: ScheduledPlan, program: Program) -> None:
        d = plan.descriptor
        if len(plan.lanes) > d.batch_capacity:
            raise WorkerError(f"{d.name}: {len(plan.lanes)} lanes exceed B = {d.batch_capacity}")
        prompts = [i for i, lane in enumerate(plan.lanes) if lane.role is LaneRole.PROMPT]
        prompt_capacity = d.token_capacity if d.kind.value == "prefill" else d.prefill_capacity
        if len(prompts) > 1:
            raise WorkerError(f"{d.name}: {len(prompts)} prompt rows; at most one is allowed")
        host_lens = sum(lane.query_length for lane in plan.lanes if lane.role is LaneRole.DECODE)
        if program.is_round and not d.is_device_allocated and host_lens > d.packed_capacity:
            raise WorkerError(
                f"{d.name}: verify rows of {host_lens} tokens exceed packed capacity "
                f"{d.packed_capacity}"
            )
        for i, lane in enumerate(plan.lanes):
            if lane.role is LaneRole.PROMPT:
                if not prompt_capacity or lane.num_prompt_tokens > prompt_capacity:
                    raise WorkerError(
                        f"{d.name} row {i}: prompt chunk of {lane.num_prompt_tokens} tokens, "
                        f"prompt capacity {prompt_capacity}"
                    )
            elif lane.query_length > d.token_capacity or lane.query_length < 1:
                raise WorkerError(
                    f"{d.name} row {i}: query length {lane.query_length} outside 1..W = "
                    f"{d.token_capacity}"
                )

    def _bind_row(
        self,
        program: Program,
        frame: HostFrame,
        row: int,
        offset: int,
        lane: LaneWork,
        live: LiveRequest,
    ) -> int:
        """Write one row into host staging; returns the packed tokens it occupies."""
        slot = lane.handle.slot
        sampling = live.request.sampling
        frame["temperature"][row] = sampling.temperature
        frame["top_k"][row] = sampling.top_k
        frame["top_p"][row] = sampling.top_p
        frame["seed"][row] = request_seed(live.request.request_id, sampling.seed)
        frame["presence_penalty"][row] = sampling.presence_penalty
        frame["frequency_penalty"][row] = sampling.frequency_penalty
        frame["repetition_penalty"][row] = sampling.repetition_penalty
        frame["min_p"][row] = sampling.min_p
        frame["min_tokens"][row] = sampling.min_tokens
        frame["slot_ids"][row] = slot
        is_round = isinstance(program.inputs, RoundProgramInputs)
        vision = self._request_vision(program, lane, live)
        if vision is not None:
            frame["rope_offset"][row] = vision.rope_delta
        if lane.role is LaneRole.PROMPT:
            start = self._prompt_cursor.get(lane.handle, 0)
            if start == 0 and lane.handle not in self._started:
                self.resources.begin(slot)  # no init program scheduled: zero it eagerly
            if lane.handle not in self._begun:
                self._bind_begin(frame, row, live)
                self._begun.add(lane.handle)
            if live.replay_ids:  # the replayed output counts as output, not as prompt
                frame["replay_from"][0] = len(live.request.prompt_ids)
            chunk = live.prompt_ids[start : start + lane.num_prompt_tokens]
            end = start + len(chunk)
            if vision is not None:
                self._bind_images(program, frame, vision, start, end)
            self._prompt_cursor[lane.handle] = end
            self.resources.reserve(slot, end, lookahead=1)
            frame["prefill_row"][0] = row
            is_last_chunk = end >= len(live.prompt_ids)
            frame["prompt_next_token"][0] = -1 if is_last_chunk else live.prompt_ids[end]
            if is_round:
                frame["prompt_length"][0] = len(chunk)
                frame["prompt_tokens"][: len(chunk)] = chunk
                return 0
            frame["query_lens"][row] = len(chunk)
            frame["token_ids"][offset : offset + len(chunk)] = chunk
            return len(chunk)
        if lane.handle not in self._begun:
            raise WorkerError(f"{lane.handle}: a decode lane before its first prompt chunk")
        d = program.descriptor
        self.resources.advance(slot, lane.query_length, lookahead=d.proposal_depth + 1)
        frame["is_decode_row"][row] = True
        if is_round:
            ceiling = "lane_ceilings" if d.is_device_allocated else "query_lens"
            frame[ceiling][row] = lane.query_length
            return 0
        # Decode rows' tokens come from the device ``pending`` buffer; the zeros are placeholders.
        frame["query_lens"][row] = lane.query_length
        return lane.query_length

    def _bind_begin(self, frame: HostFrame, row: int, live: LiveRequest) -> None:
        """The request starts its device sampling history in this frame: its row, its logit
        bias and the ids min_tokens masks (stop token ids, and EOS unless ignored)."""
        frame["history_begin"][0] = row
        bias, stop_ids = self._history_start(live)
        if bias:
            frame["bias_ids"][: len(bias)] = [t for t, _ in bias]
            frame["bias_values"][: len(bias)] = [b for _, b in bias]
        if stop_ids:
            frame["stop_ids"][: len(stop_ids)] = stop_ids

    def _history_start(self, live: LiveRequest) -> tuple[tuple[tuple[int, float], ...], list[int]]:
        """A request's logit bias and the ids min_tokens masks (stop token ids, and EOS
        unless ignored), bounded as the programs' begin buffers bound them."""
        sampling = live.request.sampling
        bias = tuple(sampling.logit_bias)
        if len(bias) > MAX_LOGIT_BIAS:
            raise WorkerError(f"{len(bias)} logit_bias entries; at most {MAX_LOGIT_BIAS}")
        stop_ids: list[int] = []
        if sampling.min_tokens:
            stops = set(sampling.stop_token_ids)
            if not sampling.ignore_eos:
                stops |= self.eos_token_ids
            stop_ids = sorted(stops)[:MAX_STOP_IDS]
        return bias, stop_ids

    def _restore_history(self, lane: LaneWork, live: LiveRequest) -> None:
        """A restore's request starts its sampling history from the restored tokens (its
        prompt part marks the prompt mask, a resumed request's replayed output counts as
        output), so penalties and min_tokens see what an unrestored request would have
        seen; its first prompt chunk then continues that history instead of resetting it.
        Every tensor-parallel rank restores the same lane from the same tokens. A vision
        window's fresh generation already carries its request's history (carry_history)."""
        history = next((p.history for p, _ in self.programs.values() if p.history), None)
        if history is None or lane.handle in self._begun:
            return
        restored = live.prompt_ids[: lane.checkpoint_tokens]
        boundary = min(len(live.request.prompt_ids), len(restored))
        bias, stop_ids = self._history_start(live)
        history.rebuild_row(
            lane.handle.slot, restored[:boundary], restored[boundary:], bias, stop_ids
        )
        self._begun.add(lane.handle)

    def _request_vision(
        self, program: Program, lane: LaneWork, live: LiveRequest
    ) -> RequestVision | None:
        """The request's encoded images (encoded at its first prompt chunk), or None."""
        images = live.request.images
        if images is None:
            return None
        name = program.descriptor.name
        if "rope_offset" not in dict(program.uploads):
            raise WorkerError(f"{name}: a request with images needs a multimodal program")
        vision = self._vision.get(lane.handle)
        if vision is None:
            if self.encode_images is None or self.feature_storage is None:
                raise WorkerError(f"{name}: a request with images, and no vision encoder")
            try:
                vision = RequestVision.encode(
                    images,
                    live.vision_window,
                    self.encode_images,
                    self.feature_storage[lane.handle.slot],
                )
            except ImageBindingError as err:
                raise WorkerError(f"{name}: {err}") from None
            self._vision[lane.handle] = vision
        return vision

    def _bind_images(
        self, program: Program, frame: HostFrame, vision: RequestVision, start: int, end: int
    ) -> None:
        """The prompt chunk's features (written to the workspace on the device, stream-ordered
        before the launch), their positions and the chunk's explicit rope positions."""
        try:
            piece = vision.chunk(start, end)
        except ImageBindingError as err:
            raise WorkerError(f"{program.descriptor.name}: {err}") from None
        inputs = program.inputs
        features = inputs.round.image_features if program.is_round else inputs.packed.image_features
        count = len(piece.positions)
        if features is None or count > features.shape[0]:
            raise WorkerError(f"{program.descriptor.name}: no room for {count} image features")
        if count:
            features[:count].copy_(piece.features.to(features.dtype))
            frame["image_positions"][:count] = piece.positions
        width = dict(program.uploads)["prompt_rope"] // 3
        frame["prompt_rope"][: 3 * width].reshape(3, width)[:, : end - start] = piece.rope

    # -- outputs -------------------------------------------------------------------

    def _step_result(self, launched: _Launched, timing: ExecutionTiming) -> FrameResult:
        out = launched.inflight.outputs
        next_tokens = out.next_tokens.tolist()  # type: ignore[attr-defined]
        failed = _failed_rows(launched, [[t] for t in next_tokens])
        failed |= _advance_grammars(launched, [[t] for t in next_tokens], failed)
        records = []
        for row, lane in enumerate(launched.lanes):
            ids = [] if lane.handle in failed else [next_tokens[row]]
            if lane.role is LaneRole.PROMPT:
                ids = ids if lane.max_advance_tokens else []
                records.append(self._record(lane, ids, launched.eos[row], lane.num_prompt_tokens))
            else:
                records.append(self._record(lane, ids, launched.eos[row]))
        logprobs = _logprobs(
            launched, [[t] for t in next_tokens], out.logprob[:, None], out.top_ids[:, None],
            out.top_logprobs[:, None],
        )  # fmt: skip
        return FrameResult(
            tuple(records),
            timing,
            logprobs=logprobs,
            prompt_logprobs=_prompt_logprobs(launched),
            failed=failed,
        )

    def _round_result(self, launched: _Launched, timing: ExecutionTiming) -> FrameResult:
        out = launched.inflight.outputs
        d = launched.plan.descriptor
        tokens = out.output_tokens.tolist()  # type: ignore[attr-defined]
        verified = out.query_lens.tolist()  # type: ignore[attr-defined]
        failed = _failed_rows(launched, tokens)
        failed |= _advance_grammars(launched, tokens, failed)
        records, offered = [], []
        for row, lane in enumerate(launched.lanes):
            emitted = [t for t in tokens[row] if t >= 0 and lane.handle not in failed]
            if lane.role is LaneRole.PROMPT:
                ids = emitted[:1] if lane.max_advance_tokens else []
                records.append(self._record(lane, ids, launched.eos[row], lane.num_prompt_tokens))
                offered.append(0)
                continue
            rows = verified[row] if d.is_device_allocated else 0
            records.append(self._record(lane, emitted, launched.eos[row], 0, rows))
            is_failed = lane.handle in failed
            offered.append(0 if is_failed else max(0, (verified[row] or lane.query_length) - 1))
        sidecar = survival = None
        if d.proposal_depth > 0:
            confidence = out.confidence  # type: ignore[attr-defined]
            num = len(launched.lanes)
            # the whole [2, B, D] sidecar: Helios validates every request slot's row
            joint = tuple(tuple(r) for r in confidence[1].clamp(0, 1).tolist())
            per_position = tuple(tuple(r) for r in confidence[0].clamp(0, 1).tolist())
            sidecar = ConfidenceSidecar(planes=(joint, per_position))
            rows_survival = out.survival[:num].clamp(0, 1).tolist()  # type: ignore[attr-defined]
            survival = tuple(tuple(rows_survival[i][: offered[i]]) for i in range(num))
        lp = out.logprobs  # type: ignore[attr-defined]
        logprobs = _logprobs(launched, tokens, lp.logprob, lp.top_ids, lp.top_logprobs)
        return FrameResult(
            tuple(records),
            timing,
            sidecar,
            survival,
            tuple(offered),
            logprobs=logprobs,
            prompt_logprobs=_prompt_logprobs(launched),
            failed=failed,
        )

    def _record(
        self,
        lane: LaneWork,
        ids: list[int],
        eos: frozenset[int],
        num_prompt_tokens: int = 0,
        num_verified: int = 0,
    ) -> CompletionRecord:
        emitted = len(ids)
        ids = ids[: lane.max_advance_tokens] if lane.role is LaneRole.DECODE else ids
        finished = False
        for i, token in enumerate(ids):
            if token in eos:
                ids, finished = ids[: i + 1], True
                break
        if lane.role is LaneRole.DECODE and len(ids) < emitted:
            # The device committed past the reported output (a stop inside an accepted
            # burst): the slot's state no longer matches prompt + output.
            self._overrun.add(lane.handle)
        return CompletionRecord(
            handle=lane.handle,
            num_prompt_tokens=num_prompt_tokens,
            token_ids=tuple(int(t) for t in ids),
            is_finished=finished,
            num_verified_tokens=num_verified,
        )


def _stage_known_rows(
    staged: PleRowsInput | None,
    deliveries: tuple[Delivery, ...],
    rows: list[torch.Tensor],
    delivery_rows: Callable[..., list[tuple[torch.Tensor, torch.Tensor]]],
    double_buffered: PleStaging | None = None,
) -> None:
    """Copy the frame's known rows into the program's PLE input, layer by layer (a program
    without one, a model without an n-gram table, only waits for them); on CUDA through the
    double-buffered pinned staging, so a queued frame never rewrites rows being copied."""
    if staged is None or not staged.is_enabled:
        return
    dtype = staged.rows[0].dtype
    for delivery, values in zip(deliveries, rows, strict=True):
        parts = delivery_rows(delivery, values, dtype)
        if double_buffered is not None:
            double_buffered.stage(staged, parts)
            continue
        for layer, (ids, layer_values) in enumerate(parts):
            stage_rows(staged, layer, ids, layer_values)


def _bind_grammar(
    program: Program, frame: HostFrame, row: int, live: LiveRequest
) -> GrammarState | None:
    """Stage a constrained row's grammar bitmask for the position this frame samples
    (model.grammar_mask); returns its matcher, which the frame's tokens then advance."""
    grammar = live.request.sampling.grammar
    if grammar is None:
        return None
    mask = program.inputs.sampling.token_mask
    if mask is None:
        raise WorkerError(f"{program.descriptor.name}: a grammar, and no grammar mask input")
    if live.grammar is None:
        live.grammar = GrammarState(grammar, live.output_ids)
    rows, words = mask.shape
    frame["is_masked"][row] = True
    table = frame.host["token_mask"][: rows * words].view(rows, words)
    live.grammar.fill(table, row)
    frame.write_gated("token_mask", (row + 1) * words)
    return live.grammar


def _advance_grammars(
    launched: _Launched, tokens: list[list[int]], failed: dict[RequestHandle, str]
) -> dict[RequestHandle, str]:
    """Advance each constrained lane's matcher by the tokens its row emitted; a lane whose
    token the grammar rejects fails alone."""
    rejected = {}
    for row, (lane, grammar) in enumerate(zip(launched.lanes, launched.grammars, strict=True)):
        if grammar is None or lane.handle in failed:
            continue
        if not all(grammar.accept(t) for t in tokens[row] if t >= 0):
            rejected[lane.handle] = GRAMMAR_REJECTED
    return rejected


def _failed_rows(launched: _Launched, tokens: list[list[int]]) -> dict[RequestHandle, str]:
    """The lanes whose row emitted INVALID_TOKEN (model.sampling), with their message."""
    return {
        lane.handle: NON_FINITE_MESSAGE
        for row, lane in enumerate(launched.lanes)
        if INVALID_TOKEN in tokens[row]
    }


def _logprobs(launched: _Launched, tokens, logprob, top_ids, top_logprobs):
    """Per lane that asked for them, the raw logprobs of its emitted tokens (column j of
    the [R, W] outputs is the j-th emitted token), read from the device only then."""
    wanted = [i for i, n in enumerate(launched.num_logprobs) if n is not None]
    if not wanted:
        return {}
    chosen, ids, values = logprob.tolist(), top_ids.tolist(), top_logprobs.tolist()
    result = {}
    for row in wanted:
        k = launched.num_logprobs[row]
        emitted = [t for t in tokens[row] if t >= 0]
        result[launched.lanes[row].handle] = tuple(
            TokenLogprob(
                int(token),
                float(chosen[row][j]),
                tuple(zip(ids[row][j][:k], values[row][j][:k], strict=True)),
            )
            for j, token in enumerate(emitted)
        )
    return result


def _prompt_logprobs(launched: _Launched) -> dict[RequestHandle, tuple[int, tuple]]:
    """The frame's scored prompt positions, read from the device only when some were:
    {handle: (first position, one PromptLogprob per position, for the token after it)}."""
    job, scores = launched.prompt_job, launched.prompt_scores
    if job is None or scores is None:
        return {}
    chosen, ranks = scores.logprob.tolist(), scores.rank.tolist()
    ids, values = scores.top_ids.tolist(), scores.top_logprobs.tolist()
    k = job.num_top
    entries = tuple(
        PromptLogprob(
            int(token), float(chosen[i]), int(ranks[i]),
            tuple(zip(ids[i][:k], values[i][:k], strict=True)),
        )
        for i, token in enumerate(job.targets)
    )  # fmt: skip
    return {job.handle: (job.start, entries)}
