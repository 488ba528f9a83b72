"""The batched training forward of Qwen3.8-Flash-Next; serving's ``forward_packed`` is the
contract (tests/model/test_training.py)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ignition.kernels import ops
from ignition.model.layers.decoder import DecoderLayer
from ignition.model.layers.ngram_hash import ngram_row_ids
from ignition.model.layers.ngram_ple import NgramPle
from ignition.model.layers.qsa import QueryGatedAttention
from ignition.model.layers.qsa_indexer import QsaIndexer
from ignition.model.mtp_gated import GatedMtpLayer


def ple_sequences(ple: NgramPle, streams: Tensor, token_ids: Tensor) -> Tensor:
    """streams [B, T, S, hidden] + PLE of sequences that each start a request."""
    batch, num_tokens = token_ids.shape
    eos = ple.hash.eos_token_id
    contexts = token_ids.new_full((batch, ple.hash.ngram_size - 1), eos)
    rows = torch.arange(batch, device=token_ids.device).repeat_interleave(num_tokens)
    offsets = torch.arange(num_tokens, device=token_ids.device).repeat(batch)
    ids = ngram_row_ids(token_ids.reshape(-1), contexts, rows, offsets, ple.hash)
    embedding = ple.ngram_embedding(ids).reshape(batch, num_tokens, -1).to(streams.dtype)
    keys = ple.norm_key(ple.key_proj(embedding).view_as(streams))
    value = ple.value_proj(embedding)  # [B, T, hidden]
    score = (keys * ple.norm_query(streams)).sum(-1) / ple.hidden**0.5  # [B, T, S]
    score = score.abs().clamp_min(1e-6).sqrt() * score.sign()
    gated = torch.sigmoid(score)[..., None] * value[:, :, None, :]  # [B, T, S, hidden]
    conv_in = ple.norm_conv(gated).flatten(2).transpose(1, 2)  # [B, C, T]
    taps = ple.conv1d.weight.shape[-1]
    conv = F.conv1d(
        F.pad(conv_in.float(), ((taps - 1) * ple.dilation, 0)),
        ple.conv1d.weight.float(),
        dilation=ple.dilation,
        groups=conv_in.shape[1],
    )
    conv_out = F.silu(conv).transpose(1, 2).to(streams.dtype).view_as(gated)
    return streams + gated + conv_out


def selection_mask(indexer: QsaIndexer, x: Tensor, positions: Tensor) -> Tensor:
    """[B, T, T] bool: the keys each query attends to (its best blocks and its tail)."""
    batch, num_tokens, _ = x.shape
    ratio, dim = indexer.ratio, indexer.head_dim
    q, raw = indexer.index_qk_proj(x).split([indexer.num_heads * dim, dim], dim=-1)
    flat_positions = positions.repeat(batch)
    q = q.reshape(batch * num_tokens, indexer.num_heads, dim)
    q = indexer.rotary(indexer.q_layernorm(q), flat_positions).view(batch, num_tokens, -1, dim)
    num_blocks = num_tokens // ratio
    members = raw[:, : num_blocks * ratio].reshape(batch, num_blocks, ratio, dim)
    pooled = members.float().mean(dim=2).to(raw.dtype)  # [B, NB, d]
    starts = (torch.arange(num_blocks, device=x.device) * ratio).repeat(batch)
    normed = indexer.k_layernorm(pooled).reshape(batch * num_blocks, 1, dim)
    block_keys = indexer.rotary(normed, starts).view(batch, num_blocks, dim)
    scores = torch.einsum("bthd,bnd->bthn", q.float(), block_keys.float())
    scores = scores.relu().sum(dim=2) / dim**0.5  # [B, T, NB]
    visible = (positions + 1) // ratio  # [T] complete blocks each query sees
    keep = min(indexer.num_blocks, num_blocks)
    is_chosen = torch.zeros(batch, num_tokens, num_blocks + 1, dtype=torch.bool, device=x.device)
    if keep:
        # serving's selection (QsaIndexer._select), ties broken as transformers breaks them
        flat_visible = visible.repeat(batch)
        best = ops.block_topk(scores.reshape(batch * num_tokens, num_blocks), flat_visible, keep)
        best = best.view(batch, num_tokens, keep)
        best = torch.where(best < visible[None, :, None], best, num_blocks)
        is_chosen.scatter_(-1, best, True)
    key_block = torch.arange(num_tokens, device=x.device) // ratio  # [T]
    # the last slot of is_chosen absorbs unkept picks and keys past the last complete block
    in_block = (
        is_chosen.gather(-1, key_block.clamp(max=num_blocks).expand(batch, num_tokens, -1))
        & (key_block < num_blocks)[None, None, :]
    )
    in_tail = key_block[None, :] >= visible[:, None]  # [T, T]
    causal = key_block.new_ones(num_tokens, num_tokens, dtype=torch.bool).tril()
    return (in_block | in_tail[None]) & causal[None]


def indexed_attention(attn: QueryGatedAttention, x: Tensor, positions: Tensor) -> Tensor:
    """Gated attention over whole sequences restricted to the indexer's selection."""
    assert attn.indexer is not None
    batch, num_tokens, _ = x.shape
    flat = x.reshape(batch * num_tokens, -1)
    q = attn.q_proj(flat).view(-1, attn.num_heads, attn.head_dim)
    k = attn.k_proj(flat).view(-1, attn.num_kv_heads, attn.head_dim)
    if attn.q_norm is not None and attn.k_norm is not None:
        q, k = attn.q_norm(q), attn.k_norm(k)
    v = attn.v_proj(flat).view(-1, attn.num_kv_heads, attn.head_dim)
    flat_positions = positions.repeat(batch)
    q, k = attn.rotary(q, flat_positions), attn.rotary(k, flat_positions)

    def heads_first(t: Tensor) -> Tensor:  # [B*T, H, Dh] -> [B, H, T, Dh]
        return t.view(batch, num_tokens, t.shape[1], -1).transpose(1, 2).float()

    mask = selection_mask(attn.indexer, x, positions)[:, None]  # [B, 1, T, T]
    out = F.scaled_dot_product_attention(
        heads_first(q),
        heads_first(k),
        heads_first(v),
        attn_mask=mask,
        scale=attn.head_dim**-0.5,
        enable_gqa=attn.num_heads != attn.num_kv_heads,
    )
    out = out.transpose(1, 2).reshape(batch * num_tokens, -1).to(x.dtype)
    if attn.g_proj is not None:
        out = out * torch.sigmoid(attn.g_proj(flat).float()).to(x.dtype)
    return attn.o_proj(out).view(batch, num_tokens, -1)


def gated_decoder_layer(
    layer: DecoderLayer | GatedMtpLayer,
    streams: Tensor,
    token_ids: Tensor | None,
    positions: Tensor,
    mixture,
    full_sequence_gdn,
) -> Tensor:
    """streams [B, T, S, hidden] -> same, in DecoderLayer.forward's order."""
    batch, num_tokens, num_streams, hidden = streams.shape
    ple = getattr(layer, "ple", None)  # the MTP layer has no PLE and is attention
    if ple is not None:
        assert token_ids is not None
        streams = ple_sequences(ple, streams, token_ids)

    def mix(flat_input: Tensor) -> Tensor:
        x = flat_input.view(batch, num_tokens, hidden)
        if getattr(layer, "kind", "qsa") == "gdn":
            out = full_sequence_gdn(layer.linear_attn, x)
        else:
            out = indexed_attention(layer.self_attn, x, positions)
        return out.reshape(batch * num_tokens, hidden)

    def feed_forward(flat_input: Tensor) -> Tensor:
        return mixture(layer.mlp, flat_input)

    flat = streams.reshape(batch * num_tokens, num_streams, hidden)
    flat = layer.attn_hc.around(flat, mix)
    flat = layer.mlp_hc.around(flat, feed_forward)
    return flat.view(batch, num_tokens, num_streams, hidden)


def gated_mtp_logits(
    model, streams: Tensor, next_embeds: Tensor, positions: Tensor, mixture, full_sequence_gdn
) -> Tensor:
    """Teacher-forced drafts: streams [B, T', S, hidden] -> draft logits [B, T', vocab]."""
    mtp = model.mtp
    batch, num_tokens, num_streams, hidden = streams.shape
    embedded = mtp.fc_embedding(mtp.pre_fc_norm_embedding(next_embeds))
    normed = mtp.pre_fc_norm_hidden(streams.flatten(-2)).view_as(streams)
    x = mtp.fc_hidden(normed) + embedded[:, :, None, :]
    for layer in mtp.layers:
        x = gated_decoder_layer(layer, x, None, positions, mixture, full_sequence_gdn)
    flat = x.reshape(batch * num_tokens, num_streams * hidden)
    return model.lm_head(mtp.mix(flat)).float().view(batch, num_tokens, -1)
