"""The MTP head of Qwen3.8-Flash-Next, as vLLM's Qwen4Exp MTP loads it (``mtp.*``); drafts
write raw index keys to the round's draft ring, never the committed one."""

from __future__ import annotations

from dataclasses import replace

from torch import Tensor, nn

from ignition.model.config import ModelConfig
from ignition.model.layers.decoder import GatedResidual, make_mlp
from ignition.model.layers.gated_hyper import GatedHyperConnection
from ignition.model.layers.norm import RMSNorm
from ignition.model.layers.qsa import DraftSelections, IndexCaches, QueryGatedAttention
from ignition.model.packing import PackedMeta
from ignition.model.state import ModelState


class GatedMtpLayer(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        assert config.gated_hyper is not None
        self.self_attn = QueryGatedAttention(config)
        self.mlp = make_mlp(config, config.mtp_mlp_kind)

        def residual() -> GatedResidual:
            return GatedResidual(
                config.hc_streams,
                config.hidden_size,
                config.gated_hyper.lowrank,
                config.rms_norm_eps,
                writes=True,
            )

        self.attn_hc = residual()
        self.mlp_hc = residual()


class GatedMtpHead(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        assert config.gated_hyper is not None
        hidden, eps = config.hidden_size, config.rms_norm_eps
        self.num_streams = config.hc_streams
        self.fc_embedding = nn.Linear(hidden, hidden, bias=False)
        self.fc_hidden = nn.Linear(hidden, hidden, bias=False)
        self.pre_fc_norm_embedding = RMSNorm(hidden, eps, offset=1.0)
        self.pre_fc_norm_hidden = RMSNorm(self.num_streams * hidden, eps, offset=1.0)
        self.layers = nn.ModuleList(GatedMtpLayer(config) for _ in range(config.mtp_num_layers))
        self.hc_mixer = GatedHyperConnection(
            self.num_streams, hidden, config.gated_hyper.lowrank, eps, writes=False
        )

    def mix(self, mtp_hidden: Tensor) -> Tensor:
        """MTP hidden [N, S * hidden] -> the head's input [N, hidden]."""
        return self.hc_mixer.read(mtp_hidden.view(mtp_hidden.shape[0], self.num_streams, -1))[0]

    def forward(
        self,
        next_embeds: Tensor,
        hidden: Tensor,
        meta: PackedMeta,
        state: ModelState,
        kv_slots: Tensor,
        is_draft: bool = False,
        selections: DraftSelections | None = None,
        position_offset: int = 0,
    ) -> tuple[Tensor, list[Tensor]]:
        """next_embeds [T, hidden], hidden [T, S * hidden] -> (MTP hidden [T, S * hidden],
        raw index keys [T, d] per indexed layer).

        Writes KV and block index keys only at ``kv_slots`` (-1 elsewhere); ``is_draft``
        reads the draft ring; ``selections`` records or reuses a round's QSA selections.
        """
        num_tokens = hidden.shape[0]
        embedded = self.fc_embedding(self.pre_fc_norm_embedding(next_embeds))
        normed = self.pre_fc_norm_hidden(hidden).view(num_tokens, self.num_streams, -1)
        streams = self.fc_hidden(normed) + embedded[:, None, :]
        narrowed = replace(meta, kv_slots=kv_slots)
        raw_keys: list[Tensor] = []
        for i, layer in enumerate(self.layers):
            index = None
            if state.mtp_index_keys.shape[0]:
                index = IndexCaches(
                    state.mtp_index_keys[i],
                    state.mtp_index_raw[i],
                    state.index_rope,
                    state.mtp_draft_raw[i] if is_draft else None,
                    state.mtp_draft_rope if is_draft else None,
                    state.seq_lens if is_draft else None,
                )
                if selections is not None and len(selections.per_layer) > i:
                    index.reuse = selections.per_layer[i]
                    index.reuse_steps = position_offset - selections.first_offset
                elif selections is not None:
                    selections.first_offset = position_offset
                    index.record = selections.per_layer

            def attend(x: Tensor, i: int = i, layer=layer, index=index) -> Tensor:
                out, keys = layer.self_attn(
                    x, narrowed, state.mtp_k_cache[i], state.mtp_v_cache[i], kv_slots, index
                )
                if keys is not None:
                    raw_keys.append(keys)
                return out

            streams = layer.attn_hc.around(streams, attend)
            streams = layer.mlp_hc.around(streams, layer.mlp)
        return streams.flatten(1), raw_keys
