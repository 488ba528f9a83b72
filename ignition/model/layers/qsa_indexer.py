"""QSA's token indexer (Qwen3.8-Flash-Next): which earlier tokens each query attends to.

One projection gives ``num_heads`` index query heads and one raw index key per token. Every
``compress_ratio`` consecutive raw keys of a request form a block; once complete, its key is
their mean, normed and roped at the block's first position, and lives in pages beside the KV
(one page holds page_size / compress_ratio block keys). A query at position p sees the
(p + 1) // ratio complete blocks, scores each as sum over heads of relu(q . k) / sqrt(d),
keeps the best ``budget / ratio`` of them and adds the incomplete tail (positions from the
last block boundary to p). With at most ``budget`` visible tokens every block is kept, which
is dense attention.

State: the block keys of committed complete blocks (paged), and a ring of the last
``compress_ratio`` raw keys and rope positions per slot (the incomplete block's members, read
when a later frame completes it). The forward writes block keys only for blocks that end at
its own tokens (as KV is written), so rejected drafts leave committed blocks untouched; the
ring is written by ``commit`` at the accepted length.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ignition.kernels import ops
from ignition.kernels.qsa_block_compress.reference import FROM_DRAFT_RING, FROM_FRAME, FROM_RING
from ignition.model.config import ModelConfig
from ignition.model.layers.norm import RMSNorm
from ignition.model.layers.rope import PartialRotary
from ignition.model.packing import PackedMeta


@dataclass
class IndexCaches:
    """One QSA layer's indexer state: paged block keys and the per-slot rings."""

    block_keys: Tensor  # [num_pages, page_size / ratio, d]
    raw_ring: Tensor  # [slots + 1, ratio, d]
    rope_ring: Tensor  # [slots + 1, ratio, 3]
    # MTP draft steps: positions past the committed length read the round's draft ring
    draft_raw: Tensor | None = None  # [slots + 1, ratio, d]
    draft_rope: Tensor | None = None  # [slots + 1, ratio, 3]
    committed: Tensor | None = None  # [slots + 1] committed lengths
    # MTP draft steps with selection reuse: the round's first step records its selection here
    # (``record``); later steps attend over it and the positions drafted since (``reuse``).
    reuse: Tensor | None = None  # [T, width] the first draft step's selection
    reuse_steps: int = 0  # positions drafted since that step
    record: list[Tensor] | None = None


class QsaIndexer(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        index = config.qsa_indexer
        assert index is not None
        self.num_heads, self.head_dim = index.num_heads, index.head_dim
        self.ratio, self.num_blocks = index.compress_ratio, index.num_blocks
        self.index_qk_proj = nn.Linear(
            config.hidden_size, (index.num_heads + 1) * index.head_dim, bias=False
        )
        self.q_layernorm = RMSNorm(index.head_dim, config.rms_norm_eps, offset=1.0)
        self.k_layernorm = RMSNorm(index.head_dim, config.rms_norm_eps, offset=1.0)
        # the attention's own rope (its rotary dims), applied to the leading index channels
        self.rotary = PartialRotary(
            index.head_dim,
            config.rotary_dim,
            config.rope_theta,
            config.rope_scaling,
            config.mrope_section,
        )

    def forward(
        self, x: Tensor, meta: PackedMeta, rope: Tensor, caches: IndexCaches
    ) -> tuple[Tensor, Tensor]:
        """(selected positions [T, budget + ratio - 1] int64, -1 = none; raw keys [T, d]).

        rope [3, T] rope positions; the block keys in ``caches`` are written here for blocks
        completed by this frame's tokens (where ``meta.kv_slots`` writes).
        """
        num_tokens = x.shape[0]
        q, raw = self.index_qk_proj(x).split(
            [self.num_heads * self.head_dim, self.head_dim], dim=-1
        )
        q = self.rotary(self.q_layernorm(q.view(num_tokens, self.num_heads, self.head_dim)), rope)
        self._write_completed_blocks(raw, meta, rope, caches)
        if caches.reuse is not None:
            selected = self._extend(caches.reuse, meta, caches.reuse_steps)
        else:
            selected = self._select(q, meta, caches.block_keys)
        if caches.record is not None:
            caches.record.append(selected)
        return selected, raw

    def _extend(self, first: Tensor, meta: PackedMeta, steps: int) -> Tensor:
        """An earlier draft step's selection [T, width] plus the ``steps`` positions since it
        (p - steps + 1 .. p): [T, width + steps]."""
        since = meta.positions[:, None] - steps + 1 + torch.arange(steps, device=first.device)
        since = torch.where(meta.is_token_valid[:, None], since, -1)
        return torch.cat([first, since], dim=1)

    def _write_completed_blocks(
        self, raw: Tensor, meta: PackedMeta, rope: Tensor, caches: IndexCaches
    ) -> None:
        """Block keys of every block whose last member is one of this frame's tokens
        (``ops.compress_block_keys``); earlier members come from the committed ring, or (MTP
        drafts) the round's draft ring."""
        block_keys, raw_ring, rope_ring = caches.block_keys, caches.raw_ring, caches.rope_ring
        ratio, num_tokens = self.ratio, raw.shape[0]
        token = torch.arange(num_tokens, device=raw.device)
        row = meta.token_row.clamp(max=meta.capacity.batch_capacity - 1)
        slot_row = meta.state_rows[row]  # [T]
        back = torch.arange(ratio - 1, -1, -1, device=raw.device)  # member j is p - back[j]
        member_pos = meta.positions[:, None] - back[None, :]  # [T, ratio]
        is_in_frame = meta.token_offset[:, None] >= back[None, :]
        frame_index = (token[:, None] - back[None, :]).clamp(min=0)
        ring_index = member_pos.remainder(ratio)
        ringed_rope = rope_ring[slot_row, ring_index[:, 0]]  # [T, 3]
        source = torch.full_like(member_pos, FROM_RING)
        draft_ring = raw_ring
        if caches.draft_raw is not None:
            assert caches.draft_rope is not None and caches.committed is not None
            is_draft = member_pos >= caches.committed[slot_row].long()[:, None]
            source = torch.where(is_draft, FROM_DRAFT_RING, source)
            draft_ring = caches.draft_raw
            ringed_rope = torch.where(
                is_draft[:, :1], caches.draft_rope[slot_row, ring_index[:, 0]], ringed_rope
            )
        source = torch.where(is_in_frame, FROM_FRAME, source).to(torch.int32)
        member_index = torch.where(is_in_frame, frame_index, slot_row[:, None] * ratio + ring_index)
        start_rope = torch.where(
            is_in_frame[:, :1].t(), rope[:, frame_index[:, 0]], ringed_rope.t().to(rope.dtype)
        )  # [3, T]
        cos, sin = self._rope_at(start_rope)
        is_complete = (meta.positions + 1).remainder(ratio) == 0
        is_written = is_complete & (meta.kv_slots >= 0)
        per_page = block_keys.shape[1]
        page_size = per_page * ratio
        block_start = meta.positions - (ratio - 1)
        page = meta.page_table[row, (block_start // page_size).clamp(min=0)].long()
        flat_slot = page * per_page + (block_start % page_size) // ratio
        slots = torch.where(is_written, flat_slot, -1).to(torch.int32)
        norm = self.k_layernorm
        ops.compress_block_keys(
            raw,
            raw_ring,
            draft_ring,
            source.contiguous(),
            member_index.contiguous(),
            cos,
            sin,
            norm.weight.float() + norm.offset,
            norm.eps,
            slots,
            block_keys,
        )

    def _rope_at(self, rope: Tensor) -> tuple[Tensor, Tensor]:
        """(cos, sin) [T, rotary_dim / 2] fp32 of rope positions [3, T], as ``PartialRotary``
        computes them (each frequency pair reading its own multimodal axis)."""
        rotary = self.rotary
        inv_freq = rotary.inv_freq.to(rope.device)
        per_pair = rope.float().index_select(0, rotary.axis.to(rope.device))  # [pairs, T]
        angles = (per_pair.t() * inv_freq[None, :]).contiguous()
        return angles.cos(), angles.sin()

    def _select(self, q: Tensor, meta: PackedMeta, block_keys: Tensor) -> Tensor:
        """[T, budget + ratio - 1] selected positions per query (best blocks, then the tail).

        Scores come from ``ops.qsa_block_scores`` (every visible block key of the query's row)
        and the blocks are chosen by ``ops.block_topk``, as in training (``training_gated``):
        its reference breaks ties among equal scores exactly as transformers does.
        """
        ratio = self.ratio
        row = meta.token_row.clamp(max=meta.capacity.batch_capacity - 1)
        max_blocks = meta.page_table.shape[1] * block_keys.shape[1]
        num_complete = (meta.positions + 1) // ratio  # [T]
        keep = min(self.num_blocks, max_blocks)
        scores = ops.qsa_block_scores(q, block_keys, meta.page_table, row, num_complete)
        chosen = ops.block_topk(scores, num_complete, keep)  # [T, keep]
        selected = selected_positions(chosen, num_complete, meta.positions, ratio, self.num_blocks)
        return torch.where(meta.is_token_valid[:, None], selected, -1)


def selected_positions(
    chosen: Tensor, num_complete: Tensor, positions: Tensor, ratio: int, num_blocks: int
) -> Tensor:
    """[T, num_blocks * ratio + ratio - 1] positions: the members of each query's kept blocks
    (``chosen`` [T, keep] from ``block_topk``; entries at or past ``num_complete`` mean none),
    then its incomplete tail up to its own position; -1 = none."""
    num_tokens = chosen.shape[0]
    is_kept = chosen < num_complete[:, None]
    member = torch.arange(ratio, device=chosen.device)
    block_pos = (chosen[..., None] * ratio + member).flatten(1)  # [T, keep * ratio]
    block_pos = torch.where(is_kept.repeat_interleave(ratio, dim=1), block_pos, -1)
    tail_pos = (num_complete * ratio)[:, None] + member[None, : ratio - 1]
    tail_pos = torch.where(tail_pos <= positions[:, None], tail_pos, -1)
    selected = torch.cat([block_pos, tail_pos], dim=1)
    width = num_blocks * ratio + ratio - 1
    if selected.shape[1] < width:
        pad = selected.new_full((num_tokens, width - selected.shape[1]), -1)
        selected = torch.cat([selected, pad], dim=1)
    return selected
