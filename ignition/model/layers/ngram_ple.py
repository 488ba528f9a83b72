"""PLE ("Engram") of Qwen3.8-Flash-Next: hashed n-gram embeddings injected into every stream;
table rows may come from outside the model (docs/model.md)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ignition.kernels import ops
from ignition.model.config import ModelConfig
from ignition.model.layers.gated_hyper import GroupedRMSNorm
from ignition.model.layers.ngram_hash import NgramHash, build_hash, hash_constants, ngram_row_ids
from ignition.model.packing import (
    PackedMeta,
    gather_rows,
    prompt_conv,
    scatter_rows,
    take_rows,
)

# (this layer's row ids [T, heads], the frame's packing) -> rows [T, heads, head_dim]
RowLookup = Callable[[Tensor, PackedMeta], Tensor]


@dataclass
class PleUpdate:
    """Candidate PLE conv windows after a packed forward (not yet committed)."""

    prompt_window: Tensor  # [L, C, window_len] per prompt lane
    decode_windows: Tensor  # [R, W, C, window_len]


def dilated_taps(weight: Tensor, dilation: int) -> Tensor:
    """[C, 1, K] dilated depthwise kernel -> the equivalent [C, (K - 1) * dilation + 1] one."""
    channels, _, taps = weight.shape
    dense = weight.new_zeros(channels, (taps - 1) * dilation + 1)
    dense[:, ::dilation] = weight[:, 0, :]
    return dense


class NgramPle(nn.Module):
    def __init__(self, config: ModelConfig, ple_index: int) -> None:
        super().__init__()
        ple = config.ngram_ple
        assert ple is not None and config.gated_hyper is not None
        eos = config.eos_token_id
        eos_id = eos[0] if isinstance(eos, tuple) else eos
        assert eos_id is not None
        self.hash: NgramHash = build_hash(
            config.vocab_size,
            ple.ngram_size,
            ple.heads_per_ngram,
            ple.vocab_size_base,
            ple.vocab_size_divisor,
            ple.seed,
            ple_index,
            eos_id,
        )
        # Explicit CPU, not buffers: a model built on "meta" (loading) still needs real values.
        self.hash_constants = hash_constants(self.hash, "cpu")
        hidden, streams = config.hidden_size, config.hc_streams
        self.hidden, self.num_streams, self.dilation = hidden, streams, ple.ngram_size
        self.ngram_embedding = nn.Embedding(self.hash.num_rows, ple.head_dim)
        self.key_proj = nn.Linear(ple.embed_dim, streams * hidden, bias=False)
        self.value_proj = nn.Linear(ple.embed_dim, hidden, bias=False)
        eps = config.rms_norm_eps
        self.norm_key = GroupedRMSNorm(streams, hidden, eps)
        self.norm_query = GroupedRMSNorm(streams, hidden, eps)
        self.norm_conv = GroupedRMSNorm(streams, hidden, eps)
        channels = streams * hidden
        self.conv1d = nn.Conv1d(
            channels,
            channels,
            ple.conv_kernel,
            groups=channels,
            dilation=ple.ngram_size,
            bias=False,
        )

    def drop_table(self) -> None:
        """Hold no n-gram table (zero rows, width/dtype/device kept): rows come from
        ``runtime.ple``, and a forward reaching for the table fails."""
        weight = self.ngram_embedding.weight
        empty = torch.empty(0, weight.shape[1], dtype=weight.dtype, device=weight.device)
        self.ngram_embedding.weight = nn.Parameter(empty, requires_grad=False)

    def row_ids(self, token_ids: Tensor, contexts: Tensor, meta: PackedMeta) -> Tensor:
        """[T, heads] rows of this layer's table (contexts: [R, ngram_size - 1] per row)."""
        rows = meta.token_row.clamp(max=meta.capacity.batch_capacity - 1)
        return ngram_row_ids(
            token_ids, contexts, rows, meta.token_offset, self.hash, self.hash_constants
        )

    def forward(
        self,
        streams: Tensor,
        token_ids: Tensor,
        contexts: Tensor,
        meta: PackedMeta,
        window: Tensor,
        rows: Tensor | RowLookup | None = None,
    ) -> tuple[Tensor, PleUpdate]:
        """streams [T, S, hidden] -> streams + PLE; window [slots + 1, S * hidden, window_len].
        rows [T, heads, head_dim] gathered, or a lookup from row ids; else read here."""
        num_tokens = streams.shape[0]
        if rows is None:
            rows = self.ngram_embedding(self.row_ids(token_ids, contexts, meta))
        elif callable(rows):
            rows = rows(self.row_ids(token_ids, contexts, meta), meta)
        embedding = rows.reshape(num_tokens, -1).to(streams.dtype)
        keys = self.norm_key(self.key_proj(embedding).view_as(streams))
        value = self.value_proj(embedding)  # [T, hidden]
        queries = self.norm_query(streams)
        score = (keys * queries).sum(-1) / math.sqrt(self.hidden)  # [T, S]
        score = score.abs().clamp_min(1e-6).sqrt() * score.sign()
        gated = torch.sigmoid(score)[..., None] * value[:, None, :]  # [T, S, hidden]
        conv_in = self.norm_conv(gated).flatten(1)  # [T, S * hidden]
        conv_out, update = self._conv(conv_in, meta, window)
        return streams + gated + conv_out.view_as(gated), update

    def _conv(self, x: Tensor, meta: PackedMeta, window: Tensor) -> tuple[Tensor, PleUpdate]:
        """SiLU(dilated causal conv) of x [T, C] in the prompt and decode workspaces."""
        weight = dilated_taps(self.conv1d.weight, self.dilation)
        out = x.new_zeros(x.shape[0] + 1, x.shape[1])
        prompt_window = take_rows(window, meta.prompt_state_row)  # [L, C, K-1]
        if meta.capacity.prefill_capacity > 0:
            y_prompt, prompt_window = prompt_conv(
                gather_rows(x, meta.prompt_index), meta, weight, prompt_window
            )
            scatter_rows(out, meta.prompt_index, y_prompt)
        y_decode, decode_windows = ops.causal_conv1d_update(
            gather_rows(x, meta.decode_index), weight, None, take_rows(window, meta.state_rows)
        )
        scatter_rows(out, meta.decode_index, y_decode)
        return out[: x.shape[0]], PleUpdate(prompt_window, decode_windows)
