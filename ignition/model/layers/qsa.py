"""QSA: query-gated softmax attention over a paged KV cache.

Grouped-query heads, RMSNorm on q and k, a partial rotary embedding and an elementwise
output gate sigmoid(W_g x) applied to the attention output before o_proj. Families without
the q/k norms or the gate (Llama) switch them off in the config; the rest is shared. Every
packed row, prompt or decode, goes through one varlen paged attention call: the row's phase
is only its query length and cached length.

With an indexer (Qwen3.8-Flash-Next) each query attends only to the positions the indexer
selects (``qsa_indexer``), through ``ops.qsa_sparse_attention``; the keys and values are
written and read in the same pages.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from ignition.kernels import ops
from ignition.model.config import ModelConfig
from ignition.model.layers.norm import RMSNorm
from ignition.model.layers.qsa_indexer import IndexCaches, QsaIndexer
from ignition.model.layers.rope import PartialRotary
from ignition.model.packing import PackedMeta


@dataclass
class DraftSelections:
    """The round's first draft step's QSA selection per MTP layer, reused by later steps.

    Scoring every block key is the indexer's cost at long context; a later draft step (one
    position further on each lane) keeps the first step's blocks and tail and adds the positions
    drafted since, which the blocks completed in between lie within. Drafts only change
    acceptance, never the verified output.
    """

    first_offset: int = 0  # the position offset of the step that recorded
    per_layer: list[Tensor] = field(default_factory=list)


class QueryGatedAttention(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        hidden, head_dim = config.hidden_size, config.head_dim
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = head_dim
        self.q_proj = nn.Linear(hidden, self.num_heads * head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, self.num_kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, self.num_kv_heads * head_dim, bias=False)
        self.g_proj = (
            nn.Linear(hidden, self.num_heads * head_dim, bias=False)
            if config.attn_output_gate
            else None
        )
        self.o_proj = nn.Linear(self.num_heads * head_dim, hidden, bias=False)
        offset = config.norm_offset
        self.q_norm = RMSNorm(head_dim, config.rms_norm_eps, offset) if config.qk_norm else None
        self.k_norm = RMSNorm(head_dim, config.rms_norm_eps, offset) if config.qk_norm else None
        self.rotary = PartialRotary(
            head_dim,
            config.rotary_dim,
            config.rope_theta,
            config.rope_scaling,
            config.mrope_section,
        )
        self.indexer = QsaIndexer(config) if config.qsa_indexer is not None else None

    def forward(
        self,
        x: Tensor,
        meta: PackedMeta,
        k_cache: Tensor,
        v_cache: Tensor,
        kv_slots: Tensor | None = None,
        index: IndexCaches | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """x [T, hidden] -> ([T, hidden], raw index keys [T, d] or None without an indexer);
        writes this call's keys/values at ``kv_slots``.

        ``kv_slots`` defaults to the meta's; the MTP head passes a narrower mapping so that only
        absorbed positions overwrite its draft context.
        """
        num_tokens = x.shape[0]
        q = self.q_proj(x).view(num_tokens, self.num_heads, self.head_dim)
        k = self.k_proj(x).view(num_tokens, self.num_kv_heads, self.head_dim)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        v = self.v_proj(x).view(num_tokens, self.num_kv_heads, self.head_dim)
        rope = meta.positions if meta.rope_positions is None else meta.rope_positions
        q = self.rotary(q, rope)
        k = self.rotary(k, rope)
        slots = meta.kv_slots if kv_slots is None else kv_slots
        ops.write_paged_kv(k, v, k_cache, v_cache, slots)
        raw_keys = None
        if self.indexer is not None and index is not None:
            rope3 = rope if rope.dim() == 2 else rope[None].expand(3, -1)
            selected, raw_keys = self.indexer(x, meta, rope3, index)
            row = meta.token_row.clamp(max=meta.capacity.batch_capacity - 1)
            attn = ops.qsa_sparse_attention(
                q, k_cache, v_cache, meta.page_table, row, selected, self.head_dim**-0.5
            )
        else:
            attn = ops.packed_paged_attention(
                q,
                k_cache,
                v_cache,
                meta.page_table,
                meta.cu_query_lens,
                meta.context_lens,
                self.head_dim**-0.5,
            )  # [T, H, Dh]
        attn = attn.reshape(num_tokens, -1)
        if self.g_proj is not None:
            attn = attn * torch.sigmoid(self.g_proj(x).float()).to(x.dtype)
        return self.o_proj(attn), raw_keys
