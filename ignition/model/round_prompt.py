"""The prompt lanes of a speculative mixed program.

Lane l's tokens are ``token_ids[l * C_l : l * C_l + length[l]]`` (C_l = prefill capacity / L),
packed at its row's device-computed offset. A padding lane (row -1 or length 0) packs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ignition.model.packing import PackedInputs


@dataclass
class PromptChunk:
    """The prompt lanes of a mixed round (buffers sized by the prefill capacity)."""

    lane: Tensor  # [L] int32 row of each prompt lane, -1 = padding lane
    token_ids: Tensor  # [prefill_capacity] int64, lane-major [L, prefill_capacity / L]
    length: Tensor  # [L] int32 tokens of each lane's chunk
    next_token: Tensor  # [L] int64 prompt token after the chunk, -1 = sample the first output

    @property
    def num_lanes(self) -> int:
        return self.lane.shape[0]

    @classmethod
    def build(
        cls, lane: int, tokens: list[int], prefill_capacity: int, next_token: int = -1
    ) -> PromptChunk:
        """One prompt lane at row ``lane``."""
        return cls.lanes([(lane, tokens, next_token)], prefill_capacity, 1)

    @classmethod
    def lanes(
        cls, chunks: list[tuple[int, list[int], int]], prefill_capacity: int, num_lanes: int
    ) -> PromptChunk:
        """``chunks`` [(row, tokens, next token)] in lanes 0.., the rest padding lanes."""
        if len(chunks) > num_lanes or prefill_capacity % num_lanes:
            raise ValueError(
                f"{len(chunks)} prompt chunks for {num_lanes} lanes of {prefill_capacity} tokens"
            )
        width = prefill_capacity // num_lanes
        buffer = torch.zeros(prefill_capacity, dtype=torch.int64)
        rows, lengths, nexts = [-1] * num_lanes, [0] * num_lanes, [-1] * num_lanes
        for k, (row, tokens, following) in enumerate(chunks):
            if len(tokens) > width:
                raise ValueError(f"prompt chunk of {len(tokens)} tokens > lane capacity {width}")
            buffer[k * width : k * width + len(tokens)] = torch.tensor(tokens, dtype=torch.int64)
            rows[k], lengths[k], nexts[k] = row, len(tokens), following
        return cls(
            lane=torch.tensor(rows, dtype=torch.int32),
            token_ids=buffer,
            length=torch.tensor(lengths, dtype=torch.int32),
            next_token=torch.tensor(nexts, dtype=torch.int64),
        )


def prompt_rows(prompt: PromptChunk, slot_ids: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """([L] bool lane holds a chunk, [B] bool row is a prompt lane, [B] int32 its length)."""
    num_rows = slot_ids.shape[0]
    row = prompt.lane.long().clamp(min=0, max=num_rows - 1)
    has_lane = (prompt.lane >= 0) & (prompt.length > 0) & (slot_ids[row] >= 0)
    is_row = (torch.arange(num_rows, device=slot_ids.device)[:, None] == row) & has_lane
    lengths = (is_row * prompt.length.long()).sum(-1).to(torch.int32)
    return has_lane, is_row.any(-1), lengths


def pack_verify_inputs(
    pending_tokens: Tensor,
    slot_ids: Tensor,
    drafts: Tensor,
    query_lens: Tensor,
    is_prompt_lane: Tensor,
    width: int,
    num_offered: int,
    num_tokens: int,
    prompt: PromptChunk | None,
    **multimodal: Tensor | None,
) -> PackedInputs:
    """Every row's pending token and drafts (or lane chunk), packed by prefix sums."""
    num_rows, device = pending_tokens.shape[0], drafts.device
    row_tokens = torch.zeros(num_rows, width, dtype=torch.int64, device=device)
    row_tokens[:, 0] = pending_tokens
    row_tokens[:, 1 : 1 + num_offered] = drafts[:, :num_offered]
    lens = query_lens.long()
    cu = torch.cumsum(lens, 0) - lens
    decode_lens = torch.where(is_prompt_lane, 0, lens)
    column = torch.arange(width, device=device)
    index = torch.where(column[None, :] < decode_lens[:, None], cu[:, None] + column, num_tokens)
    tokens = torch.zeros(num_tokens + 1, dtype=torch.int64, device=device)
    tokens[index.reshape(-1)] = row_tokens.reshape(-1)
    prefill_row = torch.full((1,), -1, dtype=torch.int32, device=device)
    next_token = torch.full((1,), -1, dtype=torch.int64, device=device)
    if prompt is not None:
        has_lane, _, _ = prompt_rows(prompt, slot_ids)
        num_lanes = prompt.num_lanes
        lane_width = prompt.token_ids.shape[0] // num_lanes
        row = prompt.lane.long().clamp(min=0, max=num_rows - 1)
        offsets = torch.arange(lane_width, device=device)
        valid = (offsets[None, :] < prompt.length.long()[:, None]) & has_lane[:, None]
        target = torch.where(valid, cu[row][:, None] + offsets[None, :], num_tokens)
        tokens[target.reshape(-1)] = prompt.token_ids
        prefill_row = torch.where(has_lane, prompt.lane, -1).to(torch.int32)
        next_token = prompt.next_token.long()
    image_features = multimodal.get("image_features")
    image_positions = multimodal.get("image_positions")
    return PackedInputs(
        token_ids=tokens[:-1],
        query_lens=query_lens.to(torch.int32),
        slot_ids=slot_ids.to(torch.int32),
        prefill_row=prefill_row,
        prompt_next_token=next_token,
        image_features=(
            torch.zeros(0, 1, device=device) if image_features is None else image_features
        ),
        image_positions=(
            torch.zeros(0, dtype=torch.int32, device=device)
            if image_positions is None
            else image_positions
        ),
        rope_offset=multimodal.get("rope_offset"),
        prompt_rope=multimodal.get("prompt_rope"),
    )
