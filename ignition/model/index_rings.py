"""The indexers' rings at commit: the last ``compress_ratio`` committed raw index keys.

A QSA block key needs every member's raw key, and a block may complete frames after its first
members were committed; each slot therefore keeps its last ``compress_ratio`` raw keys (and,
shared by all indexed layers, their rope positions) at ``position % ratio``. The target's ring
is written by ``HybridModel.commit`` at the accepted length, the MTP's when verified positions
are absorbed (``ops.write_pending_keys``, one launch per layer). Rows that keep nothing write
the scratch row, so no branch depends on the data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from ignition.kernels import ops

if TYPE_CHECKING:
    from ignition.model.packing import PackedMeta
    from ignition.model.state import ModelState
    from ignition.model.target_output import TargetOutput


def keep_index_ring(out: TargetOutput, commit_lens: Tensor) -> None:
    """Keep the last ``compress_ratio`` committed raw index keys (and rope positions) of
    every row, by position % ratio; everything else goes to the scratch row."""
    meta, state = out.meta, out.state
    ratio = state.index_raw.shape[2]
    num_rows = meta.capacity.batch_capacity
    kept = commit_lens + meta.row_prompt_lens
    row = meta.token_row.clamp(max=num_rows - 1)
    offset = meta.token_offset
    is_written = meta.is_token_valid & (offset < kept[row]) & (offset >= kept[row] - ratio)
    target = torch.where(is_written, meta.state_rows[row], meta.scratch_row)
    ring = meta.positions.remainder(ratio)
    for layer, raw in enumerate(out.index_raw):
        ops.write_pending_keys(raw, state.index_raw[layer], target, ring)
    assert out.rope is not None
    state.index_rope[target, ring] = out.rope.t().long()


def keep_mtp_ring(out: TargetOutput, lens: Tensor, raw_keys: list[Tensor]) -> None:
    """The MTP's committed ring: the last ``compress_ratio`` absorbed raw index keys."""
    meta, state = out.meta, out.state
    ratio = state.mtp_index_raw.shape[2]
    row = meta.token_row.clamp(max=lens.shape[0] - 1)
    offset = meta.token_offset
    is_kept = meta.is_token_valid & (offset < lens[row]) & (offset >= lens[row] - ratio)
    target = torch.where(is_kept, meta.state_rows[row], meta.scratch_row)
    ring = meta.positions.remainder(ratio)
    for layer, raw in enumerate(raw_keys):
        ops.write_pending_keys(raw, state.mtp_index_raw[layer], target, ring)


def keep_draft_ring(meta: PackedMeta, state: ModelState, raw_keys: list[Tensor]) -> None:
    """A draft step's raw index keys (one token per lane) into the round's draft ring; inactive
    lanes write the scratch row."""
    ratio = state.mtp_draft_raw.shape[2]
    ring = meta.positions.remainder(ratio)
    for layer, raw in enumerate(raw_keys):
        ops.write_pending_keys(raw, state.mtp_draft_raw[layer], meta.state_rows, ring)
    rope = meta.rope_positions
    rope = meta.positions[None].expand(3, -1) if rope is None else rope
    state.mtp_draft_rope[meta.state_rows, ring] = rope.t().long()
