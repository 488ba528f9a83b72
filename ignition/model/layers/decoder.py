"""One decoder layer: a token mixer (GDN or QSA) and an MLP, each behind a residual.

Qwen3.8 Flash puts each block behind a hyper-connection over ``hc_streams`` streams; families
without them (``hc_streams`` 0) keep one stream and a plain residual, through the same
read/write interface so the layer reads the same either way.
"""

from __future__ import annotations

from torch import Tensor, nn

from ignition.model.config import Qwen38Config
from ignition.model.layers.gdn import GatedDeltaNet, GdnUpdate
from ignition.model.layers.hyper import HyperConnection
from ignition.model.layers.moe import MixtureOfExperts, SwiGLU
from ignition.model.layers.norm import RMSNorm
from ignition.model.layers.qsa import QueryGatedAttention
from ignition.model.packing import PackedMeta
from ignition.model.state import ModelState


def make_mlp(config: Qwen38Config, kind: str) -> nn.Module:
    """The routed mixture of experts or a dense SwiGLU as wide as ``intermediate_size``."""
    if kind == "moe":
        return MixtureOfExperts(config)
    width = config.intermediate_size or config.shared_expert_intermediate_size
    return SwiGLU(config.hidden_size, width)


class PlainResidual(nn.Module):
    """The single-stream residual, ``x + block(x)``, with a hyper-connection's interface."""

    def read(self, streams: Tensor) -> Tensor:
        """streams [T, 1, hidden] -> block input [T, hidden]."""
        return streams[:, 0]

    def write(self, streams: Tensor, block_out: Tensor) -> Tensor:
        return streams + block_out[:, None, :]


def residual_for(config: Qwen38Config) -> nn.Module:
    if config.has_hyper_connections:
        return HyperConnection(config.hc_streams)
    return PlainResidual()


class DecoderLayer(nn.Module):
    def __init__(self, config: Qwen38Config, layer_index: int) -> None:
        super().__init__()
        self.kind = config.layer_types[layer_index]
        self.state_index = config.layer_slot(layer_index)  # row in the stacked state of its kind
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps, config.norm_offset)
        self.post_attention_layernorm = RMSNorm(
            config.hidden_size, config.rms_norm_eps, config.norm_offset
        )
        if self.kind == "gdn":
            self.linear_attn = GatedDeltaNet(config)
        else:
            self.self_attn = QueryGatedAttention(config)
        self.mlp = make_mlp(config, config.mlp_kind)
        self.attn_hc = residual_for(config)
        self.mlp_hc = residual_for(config)
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
