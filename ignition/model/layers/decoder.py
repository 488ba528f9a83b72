"""One decoder layer: a token mixer (GDN or QSA) and an MLP, each behind a residual."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor, nn

from ignition.model.config import ModelConfig
from ignition.model.layers.gated_hyper import GatedHyperConnection
from ignition.model.layers.gdn import GatedDeltaNet, GdnUpdate
from ignition.model.layers.moe import MixtureOfExperts, SwiGLU
from ignition.model.layers.ngram_ple import NgramPle, PleUpdate
from ignition.model.layers.norm import RMSNorm
from ignition.model.layers.qsa import IndexCaches, QueryGatedAttention
from ignition.model.packing import PackedMeta
from ignition.model.state import ModelState

Block = Callable[[Tensor], Tensor]


def make_mlp(config: ModelConfig, kind: str) -> nn.Module:
    """The routed mixture of experts or a dense SwiGLU as wide as ``intermediate_size``."""
    if kind == "moe":
        return MixtureOfExperts(config)
    width = config.intermediate_size or config.shared_expert_intermediate_size
    return SwiGLU(config.hidden_size, width, config.hidden_act)


class PlainResidual(nn.Module):
    """The single-stream residual, ``x + block(x)``, with a hyper-connection's interface."""

    def read(self, streams: Tensor) -> Tensor:
        """streams [T, 1, hidden] -> block input [T, hidden]."""
        return streams[:, 0]

    def write(self, streams: Tensor, block_out: Tensor) -> Tensor:
        return streams + block_out[:, None, :]

    def around(self, streams: Tensor, block: Block) -> Tensor:
        return self.write(streams, block(self.read(streams)))


class GatedResidual(GatedHyperConnection):
    """The gated-residual hyper-connection with the shared ``around`` interface."""

    def around(self, streams: Tensor, block: Block) -> Tensor:
        block_input, inject = self.read(streams)
        return self.write(streams, block(block_input), inject)


def residual_for(config: ModelConfig) -> nn.Module:
    if config.gated_hyper is not None:
        return GatedResidual(
            config.hc_streams,
            config.hidden_size,
            config.gated_hyper.lowrank,
            config.rms_norm_eps,
            writes=True,
        )
    return PlainResidual()


@dataclass
class PleInputs:
    """What every PLE layer of one forward reads: token ids, n-gram context, gathered rows."""

    token_ids: Tensor  # [T]
    contexts: Tensor  # [R, ngram_size - 1]
    rows: list[Tensor | None]  # per PLE layer: [T, heads, head_dim] or None


@dataclass
class LayerUpdate:
    """One layer's candidate state, committed by ``HybridModel.commit``."""

    gdn: GdnUpdate | None = None
    ple: PleUpdate | None = None
    index_raw: Tensor | None = None  # [T, d] raw index keys of a QSA layer with an indexer


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, layer_index: int) -> None:
        super().__init__()
        self.kind = config.layer_types[layer_index]
        self.state_index = config.layer_slot(layer_index)  # row in the stacked state of its kind
        self.ple_index = config.ple_slot(layer_index)
        has_norms = config.gated_hyper is None  # the gated read normalises the streams itself
        eps, offset = config.rms_norm_eps, config.norm_offset
        self.input_layernorm = RMSNorm(config.hidden_size, eps, offset) if has_norms else None
        self.post_attention_layernorm = (
            RMSNorm(config.hidden_size, eps, offset) if has_norms else None
        )
        if self.kind == "gdn":
            self.linear_attn = GatedDeltaNet(config)
        else:
            self.self_attn = QueryGatedAttention(config)
        self.mlp = make_mlp(config, config.mlp_kind)
        self.attn_hc = residual_for(config)
        self.mlp_hc = residual_for(config)
        self.ple = NgramPle(config, self.ple_index) if self.ple_index is not None else None

    def forward(
        self,
        streams: Tensor,
        meta: PackedMeta,
        state: ModelState,
        ple_inputs: PleInputs | None = None,
    ) -> tuple[Tensor, LayerUpdate]:
        """streams [T, S, hidden] (S = 1 for the plain residual); mutates only paged caches
        at this frame's own positions."""
        update = LayerUpdate()
        if self.ple is not None and self.ple_index is not None:
            assert ple_inputs is not None
            streams, update.ple = self.ple(
                streams,
                ple_inputs.token_ids,
                ple_inputs.contexts,
                meta,
                state.ple_window[self.ple_index],
                ple_inputs.rows[self.ple_index],
            )

        def mix(x: Tensor) -> Tensor:
            h = x if self.input_layernorm is None else self.input_layernorm(x)
            i = self.state_index
            if self.kind == "gdn":
                out, update.gdn = self.linear_attn(
                    h, meta, state.gdn_state[i], state.conv_window[i]
                )
                return out
            index = None
            if state.index_keys.shape[0]:
                index = IndexCaches(state.index_keys[i], state.index_raw[i], state.index_rope)
            out, update.index_raw = self.self_attn(
                h, meta, state.k_cache[i], state.v_cache[i], index=index
            )
            return out

        def feed_forward(x: Tensor) -> Tensor:
            norm = self.post_attention_layernorm
            return self.mlp(x if norm is None else norm(x))

        streams = self.attn_hc.around(streams, mix)
        streams = self.mlp_hc.around(streams, feed_forward)
        return streams, update
