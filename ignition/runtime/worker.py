"""The worker: executes a ScheduledPlan on its prepared program and reports completion.

For each plan it fills the program's static inputs (rows in lane order, packed
offsets are the prefix sums of the rows' query lengths, one query-length
upload), runs the program, measures the interval, and turns the outputs into
Helios completion records. Each row's role is checked against the program
before anything is written: a prompt lane needs a program with prompt capacity,
a decode lane a row width it fits in.

Host-side it tracks only what the plan implies (prompt cursors, a page upper
bound); pending decode tokens stay on the device (see compiler.programs), which
is what allows a second decode frame to be launched before the first one's
outputs are read.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

import torch

from ignition.compiler.capture import PreparedProgram, map_tensors, timed_run
from ignition.compiler.programs import Program, RoundProgramInputs, clear_inputs
from ignition.compiler.state_ops import StateOperations
from ignition.helios import CompletionRecord, ExecutionTiming, Fence, LaneRole, ScheduledPlan
from ignition.helios.types import ConfidenceSidecar, LaneWork, RequestHandle
from ignition.model.state import ModelState
from ignition.runtime.engine import FrameResult, LiveRequest
from ignition.runtime.resources import SlotResources


class WorkerError(RuntimeError):
    """A plan the prepared programs cannot execute (a runtime contract violation)."""


@dataclass
class _Launched:
    plan: ScheduledPlan
    program: Program
    outputs: object
    device_ns: int
    wall_ns: int
    lanes: tuple[LaneWork, ...]
    eos: tuple[frozenset[int], ...]


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
    ) -> None:
        self.state = state
        self.programs = programs
        self.resources = resources
        self.eos_token_ids = eos_token_ids
        # Snapshot/restore programs, ready for the prerequisite work Helios will schedule.
        self.state_ops = state_ops
        self._prompt_cursor: dict[RequestHandle, int] = {}

    # -- Worker protocol -----------------------------------------------------------

    def launch(
        self, plan: ScheduledPlan, fence: Fence, live: dict[RequestHandle, LiveRequest]
    ) -> _Launched:
        name = plan.descriptor.name
        if name not in self.programs:
            raise WorkerError(f"fence {fence.value}: no prepared program {name}")
        program, prepared = self.programs[name]
        self._validate_roles(plan, program)
        clear_inputs(program)
        eos = []
        for row, lane in enumerate(plan.lanes):
            request = live[lane.handle]
            self._bind_row(program, row, lane, request)
            stops = request.request.sampling.ignore_eos
            eos.append(frozenset() if stops else self.eos_token_ids)
        began = time.perf_counter_ns()
        outputs, device_ns = timed_run(prepared)
        # The static outputs belong to the program, and a second queued frame of the same
        # program would overwrite them before this frame is read: keep a stream-ordered copy.
        outputs = map_tensors(outputs, lambda t: t.clone())
        wall_ns = time.perf_counter_ns() - began
        return _Launched(plan, program, outputs, device_ns, wall_ns, plan.lanes, tuple(eos))

    def wait(self, launched: _Launched) -> FrameResult:
        if launched.program.is_round:
            return self._round_result(launched)
        return self._step_result(launched)

    def release(self, handle: RequestHandle) -> None:
        self._prompt_cursor.pop(handle, None)
        self.resources.release(handle.slot)

    # -- inputs --------------------------------------------------------------------

    def _validate_roles(self, plan: ScheduledPlan, program: Program) -> None:
        d = plan.descriptor
        if len(plan.lanes) > d.batch_capacity:
            raise WorkerError(f"{d.name}: {len(plan.lanes)} lanes exceed B = {d.batch_capacity}")
        prompts = [i for i, lane in enumerate(plan.lanes) if lane.role is LaneRole.PROMPT]
        prompt_capacity = d.token_capacity if d.kind.value == "prefill" else d.prefill_capacity
        if len(prompts) > 1:
            raise WorkerError(f"{d.name}: {len(prompts)} prompt rows; at most one is allowed")
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

    def _bind_row(self, program: Program, row: int, lane: LaneWork, live: LiveRequest) -> None:
        slot = lane.handle.slot
        x = program.inputs
        sampling = live.request.sampling
        x.sampling.temperature[row] = sampling.temperature
        x.sampling.top_k[row] = sampling.top_k
        x.sampling.top_p[row] = sampling.top_p
        x.sampling.seed[row] = request_seed(live.request.request_id, sampling.seed)
        d = program.descriptor
        if lane.role is LaneRole.PROMPT:
            start = self._prompt_cursor.get(lane.handle, 0)
            if start == 0:
                self.resources.begin(slot)
            chunk = live.prompt_ids[start : start + lane.num_prompt_tokens]
            end = start + len(chunk)
            next_token = live.prompt_ids[end] if end < len(live.prompt_ids) else -1
            self._prompt_cursor[lane.handle] = end
            self.resources.reserve(slot, end, lookahead=1)
            self._bind_prompt(program, row, slot, chunk, next_token)
            return
        self.resources.advance(slot, lane.query_length, lookahead=d.proposal_depth + 1)
        if isinstance(x, RoundProgramInputs):
            x.round.slot_ids[row] = slot
            x.is_decode_row[row] = True
            if x.round.query_lens is not None:
                x.round.query_lens[row] = lane.query_length
            if x.round.lane_ceilings is not None:
                x.round.lane_ceilings[row] = lane.query_length
            return
        x.packed.slot_ids[row] = slot
        x.packed.query_lens[row] = lane.query_length
        x.is_decode_row[row] = True
        self._place_tokens(program, row, [0] * lane.query_length)

    def _bind_prompt(
        self, program: Program, row: int, slot: int, chunk: tuple[int, ...], next_token: int
    ) -> None:
        x = program.inputs
        if isinstance(x, RoundProgramInputs):
            prompt = x.round.prompt
            assert prompt is not None  # guaranteed by _validate_roles
            x.round.slot_ids[row] = slot
            prompt.lane.fill_(row)
            prompt.length.fill_(len(chunk))
            prompt.next_token.fill_(next_token)
            prompt.token_ids[: len(chunk)] = torch.tensor(chunk, dtype=torch.int64)
            return
        x.packed.slot_ids[row] = slot
        x.packed.query_lens[row] = len(chunk)
        x.packed.prefill_row.fill_(row)
        x.packed.prompt_next_token.fill_(next_token)
        self._place_tokens(program, row, list(chunk))

    @staticmethod
    def _place_tokens(program: Program, row: int, tokens: list[int]) -> None:
        """Rows are bound in lane order, so a row's packed offset is the sum before it."""
        packed = program.inputs.packed  # type: ignore[union-attr]
        offset = int(packed.query_lens[:row].sum())
        packed.token_ids[offset : offset + len(tokens)] = torch.tensor(tokens, dtype=torch.int64)

    # -- outputs -------------------------------------------------------------------

    def _step_result(self, launched: _Launched) -> FrameResult:
        next_tokens = launched.outputs.next_tokens.tolist()  # type: ignore[attr-defined]
        records = []
        for row, lane in enumerate(launched.lanes):
            if lane.role is LaneRole.PROMPT:
                ids = [next_tokens[row]] if lane.max_advance_tokens else []
                records.append(self._record(lane, ids, launched.eos[row], lane.num_prompt_tokens))
            else:
                records.append(self._record(lane, [next_tokens[row]], launched.eos[row]))
        return FrameResult(tuple(records), self._timing(launched))

    def _round_result(self, launched: _Launched) -> FrameResult:
        out = launched.outputs
        d = launched.plan.descriptor
        tokens = out.output_tokens.tolist()  # type: ignore[attr-defined]
        verified = out.query_lens.tolist()  # type: ignore[attr-defined]
        records, offered = [], []
        for row, lane in enumerate(launched.lanes):
            emitted = [t for t in tokens[row] if t >= 0]
            if lane.role is LaneRole.PROMPT:
                ids = emitted[:1] if lane.max_advance_tokens else []
                records.append(self._record(lane, ids, launched.eos[row], lane.num_prompt_tokens))
                offered.append(0)
                continue
            rows = verified[row] if d.is_device_allocated else 0
            records.append(self._record(lane, emitted, launched.eos[row], 0, rows))
            offered.append(max(0, (verified[row] or lane.query_length) - 1))
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
        return FrameResult(
            tuple(records), self._timing(launched), sidecar, survival, tuple(offered)
        )

    @staticmethod
    def _record(
        lane: LaneWork,
        ids: list[int],
        eos: frozenset[int],
        num_prompt_tokens: int = 0,
        num_verified: int = 0,
    ) -> CompletionRecord:
        ids = ids[: lane.max_advance_tokens] if lane.role is LaneRole.DECODE else ids
        finished = False
        for i, token in enumerate(ids):
            if token in eos:
                ids, finished = ids[: i + 1], True
                break
        return CompletionRecord(
            handle=lane.handle,
            num_prompt_tokens=num_prompt_tokens,
            token_ids=tuple(int(t) for t in ids),
            is_finished=finished,
            num_verified_tokens=num_verified,
        )

    @staticmethod
    def _timing(launched: _Launched) -> ExecutionTiming:
        return ExecutionTiming(device_ns=max(1, launched.device_ns), wall_ns=launched.wall_ns)
