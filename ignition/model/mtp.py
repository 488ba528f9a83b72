"""The multi-token-prediction head: position i reads h_i and token i+1, predicts token i+2;
applied recursively it yields the D drafts."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ignition.model.config import ModelConfig
from ignition.model.layers.decoder import make_mlp
from ignition.model.layers.moe import SwiGLU
from ignition.model.layers.norm import RMSNorm
from ignition.model.layers.qsa import QueryGatedAttention
from ignition.model.packing import PackedMeta
from ignition.model.state import ModelState


class MtpLayer(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps, config.norm_offset)
        self.self_attn = QueryGatedAttention(config)
        self.post_attention_layernorm = RMSNorm(
            config.hidden_size, config.rms_norm_eps, config.norm_offset
        )
        self.mlp = (
            make_mlp(config, "moe")
            if config.mtp_mlp_kind == "moe"
            else SwiGLU(config.hidden_size, config.mtp_intermediate_size, config.hidden_act)
        )


class MtpHead(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        hidden = config.hidden_size
        self.pre_fc_norm_embedding = RMSNorm(hidden, config.rms_norm_eps, config.norm_offset)
        self.pre_fc_norm_hidden = RMSNorm(hidden, config.rms_norm_eps, config.norm_offset)
        self.fc = nn.Linear(2 * hidden, hidden, bias=False)
        self.layers = nn.ModuleList(MtpLayer(config) for _ in range(config.mtp_num_layers))
        self.norm = RMSNorm(hidden, config.rms_norm_eps, config.norm_offset)

    def forward(
        self,
        next_embeds: Tensor,
        hidden: Tensor,
        meta: PackedMeta,
        state: ModelState,
        kv_slots: Tensor,
    ) -> Tensor:
        """next_embeds, hidden [T, hidden] -> MTP hidden [T, hidden] (before the final norm);
        writes KV only at ``kv_slots`` (-1 elsewhere)."""
        x = self.fc(
            torch.cat(
                [self.pre_fc_norm_embedding(next_embeds), self.pre_fc_norm_hidden(hidden)], -1
            )
        )
        for i, layer in enumerate(self.layers):
            attn, _ = layer.self_attn(
                layer.input_layernorm(x),
                meta,
                state.mtp_k_cache[i],
                state.mtp_v_cache[i],
                kv_slots=kv_slots,
            )
            x = x + attn
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return x
