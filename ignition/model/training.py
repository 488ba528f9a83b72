"""The batched training forward of the hybrid models: same modules, same weights, no caches;
it must agree with :meth:`HybridModel.forward_packed` (tests/model/test_training.py)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from ignition.kernels.activations import activation as activation_fn
from ignition.kernels.gated_delta_rule.reference import chunk_gated_delta_rule
from ignition.model.layers.decoder import DecoderLayer
from ignition.model.layers.gdn import GatedDeltaNet
from ignition.model.layers.moe import MixtureOfExperts
from ignition.model.layers.norm import l2_normalize
from ignition.model.layers.qsa import QueryGatedAttention
from ignition.model.model import HybridModel


@dataclass
class TrainOutput:
    """Logits of one batched forward; the MTP logits are one position shorter."""

    logits: Tensor  # [B, T, vocab] fp32: position t predicts token t+1
    mtp_logits: Tensor | None  # [B, T-1, vocab] fp32: position t predicts token t+2
    router_probs: list[Tensor]  # per layer [B*T, experts] fp32, for the balance loss


@dataclass(frozen=True)
class TrainLosses:
    total: Tensor  # [] what the optimiser minimises
    lm: Tensor  # [] next-token cross entropy (nats per token)
    mtp: Tensor  # [] token t+2 cross entropy of the MTP head (0 without a head)
    balance: Tensor  # [] mean MoE load-balance term (1.0 when perfectly balanced)


def dense_attention(attn: QueryGatedAttention, x: Tensor, positions: Tensor) -> Tensor:
    """QSA over whole sequences: x [B, T, hidden] -> [B, T, hidden], causal, no KV cache."""
    batch, num_tokens, _ = x.shape
    flat = x.reshape(batch * num_tokens, -1)
    q = attn.q_norm(attn.q_proj(flat).view(-1, attn.num_heads, attn.head_dim))
    k = attn.k_norm(attn.k_proj(flat).view(-1, attn.num_kv_heads, attn.head_dim))
    v = attn.v_proj(flat).view(-1, attn.num_kv_heads, attn.head_dim)
    flat_positions = positions.repeat(batch)  # [B*T]
    q = attn.rotary(q, flat_positions)
    k = attn.rotary(k, flat_positions)

    def heads_first(t: Tensor) -> Tensor:  # [B*T, H, Dh] -> [B, H, T, Dh]
        return t.view(batch, num_tokens, t.shape[1], -1).transpose(1, 2)

    out = F.scaled_dot_product_attention(
        heads_first(q).float(),
        heads_first(k).float(),
        heads_first(v).float(),
        is_causal=True,
        scale=attn.head_dim**-0.5,
        enable_gqa=attn.num_heads != attn.num_kv_heads,
    )  # [B, H, T, Dh]
    out = out.transpose(1, 2).reshape(batch * num_tokens, -1).to(x.dtype)
    gate = torch.sigmoid(attn.g_proj(flat).float()).to(x.dtype)
    return attn.o_proj(out * gate).view(batch, num_tokens, -1)


def full_sequence_gdn(gdn: GatedDeltaNet, x: Tensor) -> Tensor:
    """Gated DeltaNet over whole sequences from a zero state: x [B, T, hidden] -> same shape."""
    batch, num_tokens, _ = x.shape
    heads, key_dim, value_dim = gdn.num_heads, gdn.key_dim, gdn.value_dim
    qkv = torch.cat([gdn.q_proj(x), gdn.k_proj(x), gdn.v_proj(x)], dim=-1)  # [B, T, C]
    taps = gdn.conv1d.weight.shape[-1]
    # Left padding of K - 1 zeros is the empty window of a new request.
    conv = F.conv1d(
        F.pad(qkv.transpose(1, 2).float(), (taps - 1, 0)),
        gdn.conv1d.weight.float(),
        groups=qkv.shape[-1],
    )  # [B, C, T]
    mixed = activation_fn(gdn.conv_activation)(conv).transpose(1, 2).to(x.dtype)
    key_heads = gdn.num_key_heads  # each serves heads / key_heads value heads
    key_width = key_heads * key_dim
    q, k, v = mixed.split([key_width, key_width, heads * value_dim], dim=-1)
    q = l2_normalize(q.reshape(batch, num_tokens, key_heads, key_dim)).to(x.dtype)
    k = l2_normalize(k.reshape(batch, num_tokens, key_heads, key_dim)).to(x.dtype)
    if key_heads != heads:
        q = q.repeat_interleave(heads // key_heads, dim=2)
        k = k.repeat_interleave(heads // key_heads, dim=2)
    v = v.reshape(batch, num_tokens, heads, value_dim)
    g = -gdn.A_log.float().exp() * F.softplus(gdn.a_proj(x).float() + gdn.dt_bias.float())
    beta = torch.sigmoid(gdn.b_proj(x).float())  # [B, T, H]

    def fold(t: Tensor) -> Tensor:  # [B, T, H, *] -> [T, B*H, *]: batch rows become heads
        return t.transpose(0, 1).reshape(num_tokens, batch * heads, *t.shape[3:])

    zero_state = x.new_zeros(batch * heads, key_dim, value_dim, dtype=torch.float32)
    o, _ = chunk_gated_delta_rule(
        fold(q), fold(k), fold(v), fold(g), fold(beta), zero_state, key_dim**-0.5
    )  # [T, B*H, Dv]
    o = o.reshape(num_tokens, batch, heads, value_dim).transpose(0, 1)  # [B, T, H, Dv]
    z = gdn.z_proj(x).view(batch, num_tokens, heads, value_dim)
    return gdn.out_proj(gdn.norm(o, z).reshape(batch, num_tokens, -1))


def _mixture(mlp: MixtureOfExperts, x: Tensor, router_probs: list[Tensor]) -> Tensor:
    flat = x.reshape(-1, x.shape[-1])
    if not isinstance(mlp, MixtureOfExperts):  # a dense SwiGLU: nothing to balance
        return mlp(flat).view_as(x)
    router_probs.append(torch.softmax(mlp.gate(flat).float(), dim=-1))
    return mlp(flat).view_as(x)


def _decoder_layer(
    layer: DecoderLayer, streams: Tensor, positions: Tensor, router_probs: list[Tensor]
) -> Tensor:
    """streams [B, T, 1, hidden] -> same; the order of DecoderLayer.forward, batched."""
    batch, num_tokens, num_streams, hidden = streams.shape
    flat_streams = streams.reshape(batch * num_tokens, num_streams, hidden)
    x = layer.attn_hc.read(flat_streams).view(batch, num_tokens, hidden)
    h = layer.input_layernorm(x)
    if layer.kind == "gdn":
        mixed = full_sequence_gdn(layer.linear_attn, h)
    else:
        mixed = dense_attention(layer.self_attn, h, positions)
    flat_streams = layer.attn_hc.write(flat_streams, mixed.reshape(batch * num_tokens, hidden))
    x = layer.mlp_hc.read(flat_streams).view(batch, num_tokens, hidden)
    moe = _mixture(layer.mlp, layer.post_attention_layernorm(x), router_probs)
    flat_streams = layer.mlp_hc.write(flat_streams, moe.reshape(batch * num_tokens, hidden))
    return flat_streams.view(batch, num_tokens, num_streams, hidden)


def forward_train(model: HybridModel, token_ids: Tensor) -> TrainOutput:
    """token_ids [B, T] (each row starts at position 0) -> target and MTP logits."""
    config = model.config
    if token_ids.dim() != 2 or token_ids.shape[1] < 1:
        raise ValueError(f"token_ids must be [batch, tokens], got shape {list(token_ids.shape)}")
    num_tokens = token_ids.shape[1]
    if num_tokens > config.max_position_embeddings:
        raise ValueError(
            f"{num_tokens} tokens exceed max_position_embeddings {config.max_position_embeddings}"
        )
    positions = torch.arange(num_tokens, device=token_ids.device)
    embeds = model.embed_tokens(token_ids)  # [B, T, hidden]
    if model.hc_mixer is not None:
        return _forward_gated(model, token_ids, embeds, positions)
    assert model.norm is not None
    streams = embeds[:, :, None, :]  # one plain residual stream
    router_probs: list[Tensor] = []
    for layer in model.layers:
        streams = _decoder_layer(layer, streams, positions, router_probs)
    hidden = model.norm(streams[:, :, 0])  # [B, T, hidden]
    logits = model.lm_head(hidden).float()
    mtp_logits = None
    if model.mtp is not None and num_tokens > 1:
        mtp_logits = _mtp_forward(model, hidden[:, :-1], embeds[:, 1:], positions[:-1])
    return TrainOutput(logits, mtp_logits, router_probs)


def _forward_gated(
    model: HybridModel, token_ids: Tensor, embeds: Tensor, positions: Tensor
) -> TrainOutput:
    """Qwen3.8-Flash-Next (``training_gated``): streams, PLE, the indexer, the final mixer."""
    from ignition.model.mtp_gated import GatedMtpHead
    from ignition.model.training_gated import gated_decoder_layer, gated_mtp_logits

    assert model.hc_mixer is not None
    batch, num_tokens, hidden = embeds.shape
    router_probs: list[Tensor] = []

    def mixture(mlp: MixtureOfExperts, x: Tensor) -> Tensor:
        return _mixture(mlp, x, router_probs)

    num_streams = model.config.hc_streams
    streams = embeds[:, :, None, :].expand(-1, -1, num_streams, -1)
    for layer in model.layers:
        streams = gated_decoder_layer(
            layer, streams, token_ids, positions, mixture, full_sequence_gdn
        )
    flat = streams.reshape(batch * num_tokens, num_streams, hidden)
    hidden_states = model.hc_mixer.read(flat)[0].view(batch, num_tokens, hidden)
    logits = model.lm_head(hidden_states).float()
    mtp_logits = None
    if isinstance(model.mtp, GatedMtpHead) and num_tokens > 1:

        def plain(mlp: MixtureOfExperts, x: Tensor) -> Tensor:
            return mlp(x)

        mtp_logits = gated_mtp_logits(
            model, streams[:, :-1], embeds[:, 1:], positions[:-1], plain, full_sequence_gdn
        )
    return TrainOutput(logits, mtp_logits, router_probs)


def _mtp_forward(
    model: HybridModel, hidden: Tensor, next_embeds: Tensor, positions: Tensor
) -> Tensor:
    """hidden, next_embeds [B, T', hidden] -> draft logits [B, T', vocab] (teacher forced)."""
    mtp = model.mtp
    assert mtp is not None
    x = mtp.fc(
        torch.cat([mtp.pre_fc_norm_embedding(next_embeds), mtp.pre_fc_norm_hidden(hidden)], -1)
    )
    for layer in mtp.layers:
        x = x + dense_attention(layer.self_attn, layer.input_layernorm(x), positions)
        normed = layer.post_attention_layernorm(x)
        x = x + layer.mlp(normed.reshape(-1, normed.shape[-1])).view_as(x)
    return model.lm_head(mtp.norm(x)).float()


def balance_loss(router_probs: list[Tensor], top_k: int) -> Tensor:
    """Switch-style load balance: E * sum_e (routed fraction_e * mean prob_e), 1 when uniform."""
    if not router_probs:  # dense MLPs
        return torch.zeros(())
    terms = []
    for probs in router_probs:
        num_experts = probs.shape[-1]
        chosen = probs.topk(top_k, dim=-1).indices
        fraction = F.one_hot(chosen, num_experts).float().sum(1).mean(0) / top_k  # [E]
        terms.append(num_experts * (fraction * probs.mean(0)).sum())
    return torch.stack(terms).mean()


def training_losses(
    model: HybridModel, token_ids: Tensor, mtp_weight: float = 0.5, balance_weight: float = 0.01
) -> TrainLosses:
    """Next-token loss + ``mtp_weight`` * token-t+2 loss + ``balance_weight`` * MoE balance."""
    out = forward_train(model, token_ids)
    vocab = out.logits.shape[-1]
    lm = F.cross_entropy(out.logits[:, :-1].reshape(-1, vocab), token_ids[:, 1:].reshape(-1))
    mtp = lm.new_zeros(())
    if out.mtp_logits is not None and token_ids.shape[1] > 2:
        drafts = out.mtp_logits[:, :-1].reshape(-1, vocab)
        mtp = F.cross_entropy(drafts, token_ids[:, 2:].reshape(-1))
    balance = balance_loss(out.router_probs, model.config.num_experts_per_tok)
    total = lm + mtp_weight * mtp + balance_weight * balance
    return TrainLosses(total=total, lm=lm, mtp=mtp, balance=balance)
