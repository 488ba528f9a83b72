"""The ordinary (non-speculative) packed step: forward, sample, commit everything, absorb.

Prompt rows commit their chunk and sample at its last token; decode rows commit all query
tokens; the MTP head absorbs every committed position (the draft context for later rounds).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ignition.model.grammar_mask import apply_token_mask
from ignition.model.logits_processing import (
    HistoryBegin,
    SlotHistory,
    TokenLogprobs,
    token_logprobs,
)
from ignition.model.model import HybridModel, TargetOutput
from ignition.model.packing import PackedCapacity, PackedInputs, PackedMeta
from ignition.model.sampling import SamplingTensors, sample
from ignition.model.state import ModelState


@dataclass
class StepOutput:
    next_tokens: Tensor  # [R] int64 sampled after each row's last token; -1 for inactive rows
    # and for a prompt chunk that does not end its prompt
    target: TargetOutput
    logprobs: TokenLogprobs | None = None  # raw logprobs of each row's sampled token


def next_token_per_position(
    token_ids: Tensor, cu_query_lens: Tensor, token_row: Tensor, row_next: Tensor
) -> Tensor:
    """[T] the token after each packed position: the row's next token, or row_next at its end."""
    num_tokens = token_ids.shape[0]
    shifted = torch.cat([token_ids[1:], token_ids.new_zeros(1)])
    row = token_row.clamp(max=row_next.shape[0] - 1)
    is_row_end = torch.arange(num_tokens, device=token_ids.device) == (
        cu_query_lens[1:].long()[row] - 1
    )
    return torch.where(is_row_end, row_next[row], shifted)


def add_prompt_lanes(
    history: SlotHistory,
    meta: PackedMeta,
    token_ids: Tensor,
    slot_ids: Tensor,
    begin: HistoryBegin | None,
) -> None:
    """Mark every prompt lane's chunk in its slot's prompt mask (padding lanes mark nothing)."""
    for lane in range(meta.prompt_lanes):
        prompt_row = meta.prompt_row[lane : lane + 1]
        is_prompt_token = meta.has_prompt[lane] & (meta.token_row == prompt_row)
        history.add_prompt(
            slot_ids[prompt_row],
            token_ids,
            is_prompt_token,
            meta.positions,
            None if begin is None else begin.lane_replay_from(lane),
        )


def continued_rows(meta: PackedMeta, prompt_next_token: Tensor) -> tuple[Tensor, Tensor]:
    """([R] bool, [R] int64): prompt lanes whose chunk does not end the prompt, its successor."""
    prompt_next = prompt_next_token[: meta.prompt_lanes]
    rows = torch.arange(meta.capacity.batch_capacity, device=prompt_next.device)
    is_lane = rows[:, None] == meta.prompt_row  # [R, L]
    is_lane_continued = is_lane & meta.has_prompt & (prompt_next >= 0)
    continued_next = torch.where(is_lane_continued, prompt_next, 0).sum(-1)
    return is_lane_continued.any(-1), continued_next


@torch.no_grad()
def run_step(
    model: HybridModel,
    state: ModelState,
    inputs: PackedInputs,
    capacity: PackedCapacity,
    params: SamplingTensors,
    history: SlotHistory | None = None,
    begin: HistoryBegin | None = None,
    needs_logprobs: bool = True,
) -> StepOutput:
    """One packed step; ``history`` processes logits and counts emitted tokens, ``begin``
    resets starting requests' rows, ``needs_logprobs`` False leaves ``logprobs`` None."""
    out = model.forward_packed(inputs, capacity, state)
    meta = out.meta
    if history is not None:
        if begin is not None:
            history.begin(begin, inputs.slot_ids)
        add_prompt_lanes(history, meta, inputs.token_ids, inputs.slot_ids, begin)
    is_active = (inputs.query_lens > 0) & (inputs.slot_ids >= 0)
    last = (meta.cu_query_lens[1:].long() - 1).clamp(min=0)  # [R]
    raw = out.logits_at(last)
    logits = raw if history is None else history.process(raw, history.rows(inputs.slot_ids), params)
    logits = apply_token_mask(logits, params.token_mask, params.is_masked)
    sampled = sample(logits, params, meta.positions[last] + 1)
    next_tokens = torch.where(is_active, sampled, -1)
    logprobs = token_logprobs(raw, next_tokens) if needs_logprobs else None
    model.commit(out, meta.decode_lens)

    is_continued, continued_next = continued_rows(meta, inputs.prompt_next_token)
    row_next = torch.where(is_continued, continued_next, next_tokens)
    following = next_token_per_position(
        inputs.token_ids, meta.cu_query_lens, meta.token_row, row_next
    )
    absorb_lens = torch.where(is_active, inputs.query_lens.long(), 0)
    model.absorb_draft_context(out, following, absorb_lens)
    # A prompt chunk that does not end its prompt emits nothing.
    emitted = torch.where(is_continued, -1, next_tokens)
    if history is not None:
        history.record(inputs.slot_ids, emitted[:, None])
    return StepOutput(emitted, out, logprobs)
