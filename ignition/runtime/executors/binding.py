"""Row binding: one plan's lanes checked against the program, then staged in lane order."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ignition.compiler.programs import Program
from ignition.compiler.staging import HostFrame, stage_prompt_chunk
from ignition.compiler.workspace import RoundProgramInputs
from ignition.helios import LaneRole, LaneWork, ScheduledPlan
from ignition.runtime.executors.base import WorkerError
from ignition.runtime.executors.context import ExecutorContext
from ignition.runtime.executors.history import bind_begin
from ignition.runtime.executors.images import bind_images, request_vision
from ignition.runtime.grammar import GrammarState
from ignition.runtime.proposals.grammar_drafts import proposal
from ignition.runtime.proposals.registry import Proposals

if TYPE_CHECKING:
    from ignition.runtime.requests.table import LiveRequest


def request_seed(request_id: str, seed: int | None) -> int:
    """A request's sampling seed: the one asked for, or a stable hash of its id."""
    if seed is not None:
        return int(seed) & ((1 << 63) - 1)
    return int.from_bytes(hashlib.blake2b(request_id.encode(), digest_size=8).digest()) >> 1


@dataclass
class LaneCursor:
    """Where a frame's next prompt lane binds: its lane index and first image feature."""

    lane: int = 0
    features: int = 0


def validate_roles(plan: ScheduledPlan, program: Program) -> None:
    d = plan.descriptor
    if len(plan.lanes) > d.row_capacity:
        raise WorkerError(f"{d.name}: {len(plan.lanes)} lanes exceed {d.row_capacity} rows")
    prompts = plan.prompt_rows
    # each lane's chunk fits its row of the lane-major prompt workspace
    prompt_capacity = d.lane_capacity
    if len(prompts) > d.prompt_lanes:
        raise WorkerError(
            f"{d.name}: {len(prompts)} prompt rows; at most {d.prompt_lanes} prompt lanes"
        )
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


def bind_row(
    context: ExecutorContext,
    program: Program,
    frame: HostFrame,
    row: int,
    offset: int,
    lane: LaneWork,
    live: LiveRequest,
    cursor: LaneCursor | None = None,
) -> int:
    """Write one row into host staging; returns the packed tokens it occupies."""
    ledger, resources = context.ledger, context.resources
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
    vision = request_vision(context, program, lane, live)
    if vision is not None:
        frame["rope_offset"][row] = vision.rope_delta
    if lane.role is LaneRole.PROMPT:
        cursor = cursor or LaneCursor()
        k = cursor.lane
        cursor.lane += 1
        start = ledger.prompt_cursor.get(lane.handle, 0)
        if start == 0 and lane.handle not in ledger.started:
            resources.begin(slot)  # no init program scheduled: zero it eagerly
        if lane.handle not in ledger.begun:
            bind_begin(frame, row, live, context.eos_token_ids, k)
            ledger.begun.add(lane.handle)
        if live.replay_ids:  # the replayed output counts as output, not as prompt
            frame["replay_from"][k] = len(live.request.prompt_ids)
        chunk = live.prompt_ids[start : start + lane.num_prompt_tokens]
        end = start + len(chunk)
        if vision is not None:
            cursor.features += bind_images(program, frame, vision, start, end, k, cursor.features)
        ledger.prompt_cursor[lane.handle] = end
        resources.reserve(slot, end, lookahead=1)
        frame["prefill_row"][k] = row
        is_last_chunk = end >= len(live.prompt_ids)
        frame["prompt_next_token"][k] = -1 if is_last_chunk else live.prompt_ids[end]
        capacity = program.descriptor.lane_capacity
        return stage_prompt_chunk(frame, capacity, is_round, k, row, offset, chunk)
    if lane.handle not in ledger.begun:
        raise WorkerError(f"{lane.handle}: a decode lane before its first prompt chunk")
    d = program.descriptor
    resources.advance(slot, lane.query_length, lookahead=d.proposal_depth + 1)
    frame["is_decode_row"][row] = True
    if is_round:
        ceiling = "lane_ceilings" if d.is_device_allocated else "query_lens"
        frame[ceiling][row] = lane.query_length
        return 0
    # Decode rows' tokens come from the device ``pending`` buffer; the zeros are placeholders.
    frame["query_lens"][row] = lane.query_length
    return lane.query_length


def bind_grammar(
    program: Program, frame: HostFrame, row: int, lane: LaneWork, live: LiveRequest
) -> GrammarState | None:
    """Stage a constrained row's grammar bitmasks; returns its matcher."""
    grammar = live.request.sampling.grammar
    if grammar is None:
        return None
    inputs = program.inputs
    mask = inputs.sampling.token_mask
    if mask is None:
        raise WorkerError(f"{program.descriptor.name}: a grammar, and no grammar mask input")
    if live.grammar is None:
        live.grammar = GrammarState(grammar, live.output_ids)
    round_inputs = inputs.round if isinstance(inputs, RoundProgramInputs) else None
    positions = None if round_inputs is None else round_inputs.position_masks
    rows, width, words = (mask.shape[0], 1, mask.shape[1]) if positions is None else positions.shape
    frame["is_masked"][row] = True
    table = frame.host["token_mask"][: rows * width * words].view(rows, width, words)
    drafts: tuple[int, ...] = ()
    supplied = None if round_inputs is None else round_inputs.supplied_drafts
    if supplied is not None and lane.role is LaneRole.DECODE:
        depth = supplied.shape[1]
        drafts = proposal(live, min(depth, lane.query_length - 1))
    num_kept = live.grammar.fill_positions(table[row], drafts)
    frame.write_gated("token_mask", (row + 1) * width * words)
    if num_kept:
        start = row * supplied.shape[1]
        frame["supplied_drafts"][start : start + num_kept] = drafts[:num_kept]
    return live.grammar


def bind_drafts(
    program: Program,
    frame: HostFrame,
    row: int,
    lane: LaneWork,
    live: LiveRequest,
    proposals: Proposals,
) -> int:
    """Stage a decode row's drafts from its round's source (LaneWork.proposal_source,
    runtime/proposals) as its supplied drafts; returns the drafts staged. Rows whose source
    binds none keep -1: the MTP head drafts for them."""
    inputs = program.inputs
    if lane.role is not LaneRole.DECODE or not isinstance(inputs, RoundProgramInputs):
        return 0
    supplied = inputs.round.supplied_drafts
    if supplied is None or live.request.sampling.grammar is not None:
        return 0
    depth = supplied.shape[1]
    drafts = proposals.get(lane.proposal_source).drafts(live, min(depth, lane.query_length - 1))
    if not drafts:
        return 0
    start = row * depth
    frame["supplied_drafts"][start : start + len(drafts)] = drafts
    return len(drafts)
