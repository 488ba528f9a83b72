"""The packed layout: static-capacity inputs and the per-token metadata derived from them.

Rows' tokens sit back to back; a row's offset is the prefix sum of the query lengths before
it. At most ``prompt_lanes`` (L) rows are prompt chunks (``prefill_row[l]``, lane-major
workspace ``[L, prefill_capacity / L]``); the others decode/verify up to ``decode_width``
tokens. :class:`PackedMeta` is computed on the device without host sync. Padding mutates
nothing: padded tokens map to KV slot -1 and a zero sentinel, and rows of query length 0 (or
slot -1, or a lane with ``prefill_row`` -1) write only the scratch row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ignition.kernels import ops
from ignition.model.state import ModelState


@dataclass(frozen=True)
class PackedCapacity:
    """Static extents of one packed program."""

    batch_capacity: int  # R physical rows
    decode_width: int  # W tokens per decode/verify row
    prefill_capacity: int  # prompt tokens the prompt lanes share (0: no prompt row)
    token_capacity: int  # T packed tokens
    prompt_lanes: int = 1  # L prompt rows, each of at most prefill_capacity / L tokens

    def __post_init__(self) -> None:
        if self.prompt_lanes < 1 or self.prefill_capacity % self.prompt_lanes:
            raise ValueError(
                f"{self.prompt_lanes} prompt lanes do not split prefill_capacity "
                f"{self.prefill_capacity} evenly"
            )

    @property
    def lane_capacity(self) -> int:
        """Prompt tokens one lane may carry (its row of the lane-major prompt workspace)."""
        return self.prefill_capacity // self.prompt_lanes

    @classmethod
    def mixed(
        cls, batch_capacity: int, decode_width: int, prefill_capacity: int, prompt_lanes: int = 1
    ) -> PackedCapacity:
        """Prompt rows plus decoders: prefill_capacity + (R - 1) * W packed tokens."""
        if prefill_capacity and prefill_capacity < decode_width:
            raise ValueError(
                f"prefill_capacity {prefill_capacity} < decode_width {decode_width}: a "
                "decode-only population would not fit"
            )
        tokens = (
            prefill_capacity + (batch_capacity - 1) * decode_width
            if prefill_capacity
            else batch_capacity * decode_width
        )
        return cls(batch_capacity, decode_width, prefill_capacity, tokens, prompt_lanes)

    @classmethod
    def ragged(cls, batch_capacity: int, decode_width: int, packed_capacity: int) -> PackedCapacity:
        """Decode/verify rows only, sharing ``packed_capacity`` (P) tokens."""
        if not batch_capacity <= packed_capacity <= batch_capacity * decode_width:
            raise ValueError(
                f"packed capacity {packed_capacity} must lie in [B, B*W] = "
                f"[{batch_capacity}, {batch_capacity * decode_width}]"
            )
        return cls(batch_capacity, decode_width, 0, packed_capacity)


@dataclass
class PackedInputs:
    """The device buffers one packed program reads; shapes fixed by a PackedCapacity."""

    token_ids: Tensor  # [T] int64
    query_lens: Tensor  # [R] int32
    slot_ids: Tensor  # [R] int32 state row per packed row, -1 = inactive
    prefill_row: Tensor  # [L] int32 row of each prompt lane, -1 = none
    prompt_next_token: Tensor  # [L] int64 token after each lane's chunk; -1 = the sampled one
    image_features: Tensor  # [I, hidden] vision features for the prompt lanes
    # [I] int32 each feature's position in the lane-major prompt workspace, -1 = unused
    image_positions: Tensor
    # multimodal rope: per-row offset and the chunk's (t, h, w) positions (-1: not given)
    rope_offset: Tensor | None = None  # [R] int32
    prompt_rope: Tensor | None = None  # [3, prefill_capacity] int32, lane-major like images

    @classmethod
    def build(
        cls,
        capacity: PackedCapacity,
        rows: Sequence[Sequence[int]],
        slot_ids: Sequence[int],
        prefill_row: int | Sequence[int] = -1,
        prompt_next_token: int | Sequence[int] = -1,
        hidden_size: int = 1,
        image_features: Tensor | None = None,
        image_positions: Sequence[int] = (),
        max_image_tokens: int = 0,
        device: torch.device | str = "cpu",
    ) -> PackedInputs:
        """Pack host rows (token lists) into capacity-sized buffers (tests and runtime)."""
        lanes = capacity.prompt_lanes
        prompt_rows = [prefill_row] if isinstance(prefill_row, int) else list(prefill_row)
        nexts = (
            [prompt_next_token] if isinstance(prompt_next_token, int) else list(prompt_next_token)
        )
        prompt_rows += [-1] * (lanes - len(prompt_rows))
        nexts += [-1] * (lanes - len(nexts))
        if len(prompt_rows) > lanes or len(nexts) > lanes:
            raise ValueError(f"{len(prompt_rows)} prompt rows for {lanes} prompt lanes")
        if len(rows) != len(slot_ids) or len(rows) > capacity.batch_capacity:
            raise ValueError(
                f"{len(rows)} rows with {len(slot_ids)} slot ids for batch capacity "
                f"{capacity.batch_capacity}"
            )
        for index, row in enumerate(rows):
            is_prompt = index in prompt_rows
            limit = capacity.lane_capacity if is_prompt else capacity.decode_width
            if len(row) > limit:
                kind = "prompt" if is_prompt else "decode"
                raise ValueError(f"{kind} row {index} has {len(row)} tokens, capacity {limit}")
        total = sum(len(row) for row in rows)
        if total > capacity.token_capacity:
            raise ValueError(f"{total} packed tokens exceed capacity {capacity.token_capacity}")
        if max(prompt_rows) >= len(rows):
            raise ValueError(f"prefill_row {max(prompt_rows)} names no row ({len(rows)} rows)")
        tokens = torch.zeros(capacity.token_capacity, dtype=torch.int64)
        flat = [t for row in rows for t in row]
        tokens[: len(flat)] = torch.tensor(flat, dtype=torch.int64)
        query_lens = torch.zeros(capacity.batch_capacity, dtype=torch.int32)
        query_lens[: len(rows)] = torch.tensor([len(r) for r in rows], dtype=torch.int32)
        slots = torch.full((capacity.batch_capacity,), -1, dtype=torch.int32)
        slots[: len(rows)] = torch.tensor(list(slot_ids), dtype=torch.int32)
        num_image = max(max_image_tokens, len(image_positions))
        features = torch.zeros(num_image, hidden_size)
        positions = torch.full((num_image,), -1, dtype=torch.int32)
        if image_positions:
            if image_features is None or image_features.shape[0] != len(image_positions):
                raise ValueError("image_features must have one row per image position")
            features = torch.zeros(num_image, image_features.shape[1], dtype=image_features.dtype)
            features[: len(image_positions)] = image_features
            positions[: len(image_positions)] = torch.tensor(image_positions, dtype=torch.int32)
        return cls(
            token_ids=tokens.to(device),
            query_lens=query_lens.to(device),
            slot_ids=slots.to(device),
            prefill_row=torch.tensor(prompt_rows, dtype=torch.int32, device=device),
            prompt_next_token=torch.tensor(nexts, dtype=torch.int64, device=device),
            image_features=features.to(device),
            image_positions=positions.to(device),
        )


@dataclass
class PackedMeta:
    """Per-token and per-row metadata of one packed program, derived on the device."""

    capacity: PackedCapacity
    query_lens: Tensor  # [R] int32
    cu_query_lens: Tensor  # [R + 1] int32
    token_row: Tensor  # [T] int64 row of each token, R for padding
    token_offset: Tensor  # [T] int64 index of the token inside its row
    is_token_valid: Tensor  # [T] bool
    positions: Tensor  # [T] int64 absolute sequence position (0 for padding)
    state_rows: Tensor  # [R] int64 state row per packed row (scratch row when inactive)
    context_lens: Tensor  # [R] int32 cached + query length
    page_table: Tensor  # [R, max_pages] int32
    kv_slots: Tensor  # [T] int32 flat KV slot, -1 = no write
    has_prompt: Tensor  # [L] bool per prompt lane
    prompt_row: Tensor  # [L] int64 row of each lane (clamped to 0 when absent); [L], not [],
    # so that indexing with it is a device gather rather than a host read of a 0-d index
    prompt_len: Tensor  # [L] int32
    prompt_index: Tensor  # [prefill_capacity] int64 packed index, lane-major, T = sentinel
    row_prompt_lens: Tensor  # [R] int64 each row's prompt chunk length (0: not a prompt row)
    decode_lens: Tensor  # [R] int64 query length of decode rows (0 for the prompt rows)
    decode_index: Tensor  # [R, W] int64 packed index, T = sentinel
    scratch_row: int
    rope_positions: Tensor | None = None  # [3, T] multimodal rope, None = ``positions``

    @classmethod
    def build(
        cls,
        capacity: PackedCapacity,
        query_lens: Tensor,
        slot_ids: Tensor,
        prefill_row: Tensor,
        state: ModelState,
        position_offset: int = 0,
    ) -> PackedMeta:
        """``position_offset`` shifts positions past the committed length (MTP draft steps)."""
        device = query_lens.device
        num_rows, num_tokens = capacity.batch_capacity, capacity.token_capacity
        lens = query_lens.long()
        cu = torch.zeros(num_rows + 1, dtype=torch.int64, device=device)
        cu[1:] = torch.cumsum(lens, 0)
        token = torch.arange(num_tokens, device=device)
        token_row = torch.searchsorted(cu[1:], token, right=True)  # [T], R past the total
        is_valid = token_row < num_rows
        row_clamped = token_row.clamp(max=num_rows - 1)
        token_offset = torch.where(is_valid, token - cu[row_clamped], 0)

        is_row_active = (slot_ids >= 0) & (lens > 0)
        state_rows = torch.where(is_row_active, slot_ids.long(), state.scratch_row)
        cached = state.seq_lens[state_rows].long() + position_offset  # [R]
        positions = torch.where(is_valid, cached[row_clamped] + token_offset, 0)
        context_lens = (cached + lens).to(torch.int32)
        page_table = state.page_table[state_rows]  # [R, max_pages]

        page_size = state.page_size
        page_col = (positions // page_size).clamp(max=state.max_pages_per_slot - 1)
        page = page_table[row_clamped, page_col].long()
        is_in_pages = positions < state.capacity_tokens
        is_written = is_valid & is_row_active[row_clamped] & is_in_pages & (page >= 0)
        kv_slots = torch.where(is_written, page * page_size + positions % page_size, -1)

        lanes = prefill_row[: capacity.prompt_lanes]
        prompt_row = lanes.long().clamp(min=0, max=num_rows - 1)
        has_prompt = (lanes >= 0) & is_row_active[prompt_row]
        has_prompt &= capacity.prefill_capacity > 0  # a program without a prompt workspace
        prompt_len = torch.where(has_prompt, lens[prompt_row], 0).to(torch.int32)
        prompt_pos = torch.arange(capacity.lane_capacity, device=device)
        prompt_index = torch.where(
            prompt_pos[None, :] < prompt_len.long()[:, None],
            cu[prompt_row][:, None] + prompt_pos[None, :],
            num_tokens,
        ).reshape(-1)
        is_lane_row = (torch.arange(num_rows, device=device)[:, None] == prompt_row) & has_prompt
        row_prompt_lens = (is_lane_row * prompt_len.long()).sum(-1)  # [R]
        decode_lens = torch.where(is_lane_row.any(-1) | ~is_row_active, 0, lens)
        width = torch.arange(capacity.decode_width, device=device)
        decode_index = torch.where(
            width[None, :] < decode_lens[:, None], cu[:-1, None] + width[None, :], num_tokens
        )
        return cls(
            capacity=capacity,
            query_lens=query_lens,
            cu_query_lens=cu.to(torch.int32),
            token_row=token_row,
            token_offset=token_offset,
            is_token_valid=is_valid,
            positions=positions,
            state_rows=state_rows,
            context_lens=context_lens,
            page_table=page_table,
            kv_slots=kv_slots.to(torch.int32),
            has_prompt=has_prompt,
            prompt_row=prompt_row,
            prompt_len=prompt_len,
            prompt_index=prompt_index,
            row_prompt_lens=row_prompt_lens,
            decode_lens=decode_lens,
            decode_index=decode_index,
            scratch_row=state.scratch_row,
        )

    @property
    def prompt_state_row(self) -> Tensor:
        """[L] state row of each prompt lane: its slot, or the scratch row when it is padding."""
        return torch.where(self.has_prompt, self.state_rows[self.prompt_row], self.scratch_row)

    @property
    def prompt_lanes(self) -> int:
        return self.capacity.prompt_lanes

    def lane_major(self, x: Tensor) -> Tensor:
        """[L * C_l, ...] gathered prompt operands -> [L, C_l, ...] (C_l the lane capacity)."""
        return x.view(self.prompt_lanes, self.capacity.lane_capacity, *x.shape[1:])


def prompt_conv(
    x: Tensor, meta: PackedMeta, weight: Tensor, windows: Tensor, activation: str = "silu"
) -> tuple[Tensor, Tensor]:
    """Causal conv prefill per prompt lane: ``x`` [L * C_l, C] lane-major, ``windows``
    [L, C, K-1]; returns (y [L * C_l, C], windows [L, C, K-1])."""
    lanes = meta.lane_major(x)
    pieces = [
        ops.causal_conv1d_prefill(
            lanes[i], weight, None, windows[i], meta.prompt_len[i : i + 1], activation=activation
        )
        for i in range(meta.prompt_lanes)
    ]
    y = torch.cat([piece[0] for piece in pieces]) if len(pieces) > 1 else pieces[0][0]
    return y, torch.stack([piece[1] for piece in pieces])


def multimodal_rope(meta: PackedMeta, inputs: PackedInputs) -> Tensor | None:
    """[3, T] rope positions (sequence position plus row offset, or the chunk's explicit ones)."""
    if inputs.rope_offset is None and inputs.prompt_rope is None:
        return None
    num_tokens = meta.positions.shape[0]
    rope = meta.positions
    if inputs.rope_offset is not None:
        rows = meta.token_row.clamp(max=meta.capacity.batch_capacity - 1)
        offset = inputs.rope_offset.long()[rows]
        rope = rope + torch.where(meta.is_token_valid, offset, 0)
    rope = torch.cat([rope, rope.new_zeros(1)])[None].repeat(3, 1)  # [3, T + 1] sentinel
    if inputs.prompt_rope is not None and inputs.prompt_rope.numel():
        explicit = inputs.prompt_rope.long()
        is_given = (meta.prompt_index < num_tokens) & (explicit[0] >= 0)
        target = torch.where(is_given, meta.prompt_index, num_tokens)
        rope[:, target] = explicit
    return rope[:, :num_tokens]


def gather_rows(x: Tensor, index: Tensor) -> Tensor:
    """x[index] where index == len(x) reads a zero row (the padding sentinel)."""
    padded = torch.cat([x, x.new_zeros(1, *x.shape[1:])], dim=0)
    return padded[index]


def take_rows(x: Tensor, rows: Tensor) -> Tensor:
    """``x[rows]`` for a 1-D ``rows`` via ``index_select`` (faster on CPU for large rows)."""
    return x.index_select(0, rows)


def take_positions(x: Tensor, rows: Tensor, positions: Tensor) -> Tensor:
    """``x[rows, positions]`` via :func:`take_rows` over the first two dims flattened."""
    flat = x.reshape(x.shape[0] * x.shape[1], *x.shape[2:])
    return take_rows(flat, rows * x.shape[1] + positions)


def kept_candidates(candidates: Tensor, row_index: Tensor, position: Tensor) -> Tensor:
    """``candidates[row_index, position]`` for a commit over every row in order; at width 1
    this is the view ``candidates[:, 0]`` (no copy of each layer's states)."""
    if candidates.shape[1] == 1:
        return candidates[:, 0]
    return take_positions(candidates, row_index, position)


def scatter_rows(padded_out: Tensor, index: Tensor, values: Tensor) -> None:
    """padded_out[index] = values; padded_out has one extra row that absorbs the sentinel."""
    flat_index = index.reshape(-1)
    padded_out[flat_index] = values.reshape(flat_index.shape[0], *values.shape[index.dim() :]).to(
        padded_out.dtype
    )
