"""One decoder layer: a token mixer (GDN or QSA) and the MoE, each behind a hyper-connection."""

from __future__ import annotations

from torch import Tensor, nn

from ignition.model.config import Qwen38Config
from ignition.model.layers.gdn import GatedDeltaNet, GdnUpdate
from ignition.model.layers.hyper import HyperConnection
from ignition.model.layers.moe import MixtureOfExperts
from ignition.model.layers.norm import RMSNorm
from ignition.model.layers.qsa import QueryGatedAttention
from ignition.model.packing import PackedMeta
from ignition.model.state import ModelState


class DecoderLayer(nn.Module):
    def __init__(self, config: Qwen38Config, layer_index: int) -> None:
        super().__init__()
        self.kind = config.layer_types[layer_index]
        self.state_index = config.layer_slot(layer_index)  # row in the stacked state of its kind
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        if self.kind == "gdn":
            self.linear_attn = GatedDeltaNet(config)
        else:
            self.self_attn = QueryGatedAttention(config)
        self.mlp = MixtureOfExperts(config)
        self.attn_hc = HyperConnection(config.hc_streams)
        self.mlp_hc = HyperConnection(config.hc_streams)
        self.ple_proj = (
            nn.Linear(config.ple_dim, config.hidden_size, bias=False) if config.ple_dim else None
        )

    def forward(
        self, streams: Tensor, ple: Tensor | None, meta: PackedMeta, state: ModelState
    ) -> tuple[Tensor, GdnUpdate | None]:
        """streams [T, S, hidden]; ple [T, ple_dim] this layer's slice. Mutates only KV pages."""
        x = self.attn_hc.read(streams)
        if self.ple_proj is not None and ple is not None:
            x = x + self.ple_proj(ple)
        h = self.input_layernorm(x)
        update = None
        if self.kind == "gdn":
            mixed, update = self.linear_attn(
                h, meta, state.gdn_state[self.state_index], state.conv_window[self.state_index]
            )
        else:
            i = self.state_index
            mixed = self.self_attn(h, meta, state.k_cache[i], state.v_cache[i])
        streams = self.attn_hc.write(streams, mixed)
        x = self.mlp_hc.read(streams)
        streams = self.mlp_hc.write(streams, self.mlp(self.post_attention_layernorm(x)))
        return streams, update
