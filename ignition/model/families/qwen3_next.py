"""Qwen3-Next (``qwen3_next``): Qwen3.5-MoE with ``in_proj_qkvz`` / ``in_proj_ba`` fused per
GDN key head, regrouped here; only fully sparse (all-MoE) checkpoints are accepted."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from torch import Tensor, nn

from ignition.model.config import ConfigError, ModelConfig
from ignition.model.families.base import CheckpointLayout, TensorSource
from ignition.model.families.qwen3_5 import Qwen35MoeFamily
from ignition.model.families.registry import register

_GDN_PARAM = re.compile(r"^(?P<block>.*\.linear_attn)\.(?P<proj>[qkvzab])_proj\.weight$")


class Qwen3NextFamily(Qwen35MoeFamily):
    name = "qwen3_next"
    model_types = ("qwen3_next",)
    recipe = "qwen3-next"
    description = "Qwen3-Next: GDN + gated attention 3:1, routed + shared experts, MTP"

    def parse_config(
        self, raw: Mapping[str, Any], source: str, tensor_names: frozenset[str]
    ) -> ModelConfig:
        if raw.get("norm_topk_prob", True) is not True:
            raise ConfigError(source, "key 'norm_topk_prob' = false: not supported (expected true)")
        if raw.get("mlp_only_layers") or raw.get("decoder_sparse_step", 1) != 1:
            raise ConfigError(
                source,
                f"keys 'mlp_only_layers' = {raw.get('mlp_only_layers')!r} / "
                f"'decoder_sparse_step' = {raw.get('decoder_sparse_step')!r}: only checkpoints "
                "whose every layer is MoE are supported",
            )
        return super().parse_config(raw, source, tensor_names)

    def layout(self, model: nn.Module, tensor_names: frozenset[str]) -> CheckpointLayout:
        layout = super().layout(model, tensor_names)
        config: ModelConfig = model.config
        sources = dict(layout.sources)
        for name, _ in model.named_parameters():
            match = _GDN_PARAM.match(name if name.startswith("mtp.") else f"model.{name}")
            if match:
                sources[name] = _grouped_source(match["block"], match["proj"], config)
        return CheckpointLayout(sources, layout.ignored_prefixes)

    def load_notes(self, config: ModelConfig, raw: Mapping[str, Any]) -> list[str]:
        return []


def _grouped_source(block: str, proj: str, config: ModelConfig) -> TensorSource:
    """One of q, k, v, z (from in_proj_qkvz) or a, b (from in_proj_ba), per key-head group."""
    key_heads = config.num_linear_key_heads
    ratio = config.linear_num_heads // key_heads
    dk, dv, hidden = config.linear_key_head_dim, config.linear_value_head_dim, config.hidden_size
    if proj in "ab":
        offsets = {"b": (0, ratio), "a": (ratio, 2 * ratio)}
        return TensorSource(
            (f"{block}.in_proj_ba.weight",),
            ((key_heads * 2 * ratio, hidden),),
            _group_rows(key_heads, 2 * ratio, *offsets[proj]),
        )
    width = 2 * dk + 2 * ratio * dv
    offsets = {
        "q": (0, dk),
        "k": (dk, 2 * dk),
        "v": (2 * dk, 2 * dk + ratio * dv),
        "z": (2 * dk + ratio * dv, width),
    }
    return TensorSource(
        (f"{block}.in_proj_qkvz.weight",),
        ((key_heads * width, hidden),),
        _group_rows(key_heads, width, *offsets[proj]),
    )


def _group_rows(num_groups: int, group_rows: int, start: int, stop: int):
    def take(tensors: Sequence[Tensor]) -> Tensor:
        weight = tensors[0]
        grouped = weight.view(num_groups, group_rows, weight.shape[-1])[:, start:stop]
        return grouped.reshape(-1, weight.shape[-1])

    return take


QWEN3_NEXT = register(Qwen3NextFamily())
