"""Qwen3.5 / Qwen3.6, dense (``qwen3_5``) and MoE (``qwen3_5_moe``), as Hugging Face publishes them.

The layout splits the fused ``in_proj_qkv``, ``q_proj`` (query then gate per head) and
``gate_up_proj`` tensors into the shared modules. Architecture: docs/model.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from torch import Tensor, nn

from ignition.model.config import ConfigError, ModelConfig
from ignition.model.config_vision import VisionConfig, as_vision_config
from ignition.model.families.base import (
    CheckpointLayout,
    ModelFamily,
    TensorSource,
    as_dtype,
)
from ignition.model.families.hf_text import TextReader, text_section
from ignition.model.families.registry import register

_LAYER_KINDS = {"linear_attention": "gdn", "full_attention": "qsa"}
_MTP_LAYER = re.compile(r"^mtp\.layers\.(\d+)\.")
NESTED_PREFIX = "model.language_model."
FLAT_PREFIX = "model."


def mtp_layer_count(tensor_names: frozenset[str]) -> int:
    layers = {int(m.group(1)) for name in tensor_names if (m := _MTP_LAYER.match(name))}
    return max(layers) + 1 if layers else 0


def has_mtp(tensor_names: frozenset[str]) -> bool:
    return any(name.startswith("mtp.") for name in tensor_names)


class Qwen35Family(ModelFamily):
    name = "qwen3_5"
    model_types = ("qwen3_5", "qwen3_5_text")
    recipe = "qwen35"
    description = "Qwen3.5 / Qwen3.6 dense: GDN + gated attention 3:1, SwiGLU, MTP"
    is_moe = False

    def parse_config(
        self, raw: Mapping[str, Any], source: str, tensor_names: frozenset[str]
    ) -> ModelConfig:
        text, prefix = text_section(raw, source)
        r = TextReader(text, prefix, source)
        r.unsupported_true("attention_bias")
        num_layers = r.int("num_hidden_layers")
        layer_types = read_layer_types(text, prefix, source, num_layers)
        values = shared_text_values(
            self.model_types[0], raw, text, prefix, source, r, tensor_names, layer_types, 0.25
        )
        num_mtp = 0
        if has_mtp(tensor_names):
            num_mtp = text.get("mtp_num_hidden_layers") or mtp_layer_count(tensor_names)
        values.update(
            hc_streams=0,
            mtp_num_layers=num_mtp,
            mtp_feeds_normed_hidden=True,
        )
        if self.is_moe:
            values.update(
                mlp_kind="moe",
                mtp_mlp_kind="moe",
                num_experts=r.int("num_experts"),
                num_experts_per_tok=r.int("num_experts_per_tok"),
                moe_intermediate_size=r.int("moe_intermediate_size"),
                shared_expert_intermediate_size=r.int("shared_expert_intermediate_size"),
            )
        else:
            values.update(
                mlp_kind="dense",
                mtp_mlp_kind="dense",
                intermediate_size=r.int("intermediate_size"),
                num_experts=0,
                num_experts_per_tok=0,
                moe_intermediate_size=0,
                shared_expert_intermediate_size=0,
            )
        return ModelConfig.from_dict(values, source=source)

    def layout(self, model: nn.Module, tensor_names: frozenset[str]) -> CheckpointLayout:
        config: ModelConfig = model.config
        is_nested = any(n.startswith(NESTED_PREFIX) for n in tensor_names)
        trunk = NESTED_PREFIX if is_nested else FLAT_PREFIX
        sources = {
            name: _source(name, tuple(param.shape), trunk, config, tensor_names)
            for name, param in model.named_parameters()
        }
        ignored = (
            ("mtp.embed_tokens.",) if config.vision else ("model.visual.", "mtp.embed_tokens.")
        )
        return CheckpointLayout(sources, ignored_prefixes=ignored)

    def config_json(self, config: ModelConfig) -> dict[str, Any]:
        from ignition.model.families.lineage_json import lineage_config_json, moe_keys

        raw = lineage_config_json(config, "full_attention")
        raw["mtp_num_hidden_layers"] = config.mtp_num_layers
        if self.is_moe:
            return raw | moe_keys(config)
        return raw | {"intermediate_size": config.intermediate_size}

    def load_notes(self, config: ModelConfig, raw: Mapping[str, Any]) -> list[str]:
        notes = []
        if "vision_config" in raw and config.vision is None:
            notes.append(
                "vision: config.json has vision_config but the checkpoint has no model.visual.* "
                "tensors; text prompts only"
            )
        return notes


class Qwen35MoeFamily(Qwen35Family):
    name = "qwen3_5_moe"
    model_types = ("qwen3_5_moe", "qwen3_5_moe_text")
    recipe = "qwen35-moe"
    description = "Qwen3.5 / Qwen3.6 MoE: GDN + gated attention 3:1, routed + shared experts, MTP"
    is_moe = True


def shared_text_values(
    model_type: str,
    raw: Mapping[str, Any],
    text: Mapping[str, Any],
    prefix: str,
    source: str,
    r: TextReader,
    tensor_names: frozenset[str],
    layer_types: tuple[str, ...],
    default_rotary_factor: float,
) -> dict[str, Any]:
    """The config fields the Qwen3.5 lineage states alike."""
    hidden = r.int("hidden_size")
    num_heads = r.int("num_attention_heads")
    head_dim = r.int("head_dim", hidden // num_heads)
    rope = r.rope()
    rope_type = rope.get("rope_type", "default")
    if rope_type not in ("default", "mrope"):  # text positions make mrope plain rope
        raise ConfigError(
            source, f"key '{prefix}rope_parameters.rope_type' = {rope_type!r}: expected default"
        )
    factor = rope.get("partial_rotary_factor", default_rotary_factor)
    rotary_dim = int(head_dim * factor) if isinstance(factor, int | float) else 0
    if not isinstance(factor, int | float) or not 0 < factor <= 1 or rotary_dim % 2:
        raise ConfigError(
            source,
            f"key '{prefix}rope_parameters.partial_rotary_factor' = {factor!r}: must give "
            f"an even rotary width in (0, head_dim {head_dim}]",
        )
    tie = raw.get("tie_word_embeddings", text.get("tie_word_embeddings", False))
    return dict(
        model_type=str(raw.get("model_type", model_type)),
        vocab_size=r.int("vocab_size"),
        hidden_size=hidden,
        num_hidden_layers=len(layer_types),
        layer_types=layer_types,
        num_attention_heads=num_heads,
        num_key_value_heads=r.int("num_key_value_heads"),
        head_dim=head_dim,
        rotary_dim=rotary_dim,
        rope_theta=float(rope.get("rope_theta", 10_000_000.0)),
        linear_num_heads=r.int("linear_num_value_heads"),
        linear_num_key_heads=r.int("linear_num_key_heads"),
        linear_key_head_dim=r.int("linear_key_head_dim"),
        linear_value_head_dim=r.int("linear_value_head_dim"),
        conv_kernel=r.int("linear_conv_kernel_dim", 4),
        vision=vision_block(raw, source, tensor_names),
        rms_norm_eps=r.float("rms_norm_eps", 1e-6),
        hidden_act=r.activation("hidden_act"),
        max_position_embeddings=r.int("max_position_embeddings", 32768),
        tie_word_embeddings=bool(tie),
        torch_dtype=as_dtype(raw, source, as_dtype(text, source)),
        norm_offset=1.0,
        image_token_id=raw.get("image_token_id"),
        vision_start_token_id=raw.get("vision_start_token_id"),
        vision_end_token_id=raw.get("vision_end_token_id"),
        mrope_section=_mrope_section(rope, prefix, source),
        **r.token_ids(raw),
    )


def _mrope_section(
    rope: Mapping[str, Any], prefix: str, source: str
) -> tuple[int, int, int] | None:
    section = rope.get("mrope_section")
    if section is None:
        return None
    if not isinstance(section, list | tuple) or len(section) != 3:
        raise ConfigError(
            source, f"key '{prefix}rope_parameters.mrope_section' = {section!r}: expected 3 ints"
        )
    return tuple(section)


_VISION_KEYS = {  # VisionConfig field -> vision_config key
    "hidden_size": "hidden_size",
    "num_hidden_layers": "depth",
    "num_attention_heads": "num_heads",
    "patch_size": "patch_size",
    "in_channels": "in_channels",
    "intermediate_size": "intermediate_size",
    "out_hidden_size": "out_hidden_size",
    "temporal_patch_size": "temporal_patch_size",
    "spatial_merge_size": "spatial_merge_size",
    "num_position_embeddings": "num_position_embeddings",
    "hidden_act": "hidden_act",
}


def vision_block(
    raw: Mapping[str, Any], source: str, tensor_names: frozenset[str]
) -> VisionConfig | None:
    """The vision tower's dimensions, when config.json declares one and its tensors exist."""
    block = raw.get("vision_config")
    if block is None or not any(n.startswith("model.visual.") for n in tensor_names):
        return None
    if not isinstance(block, Mapping):
        raise ConfigError(source, f"key 'vision_config' = {block!r}: must be an object")
    values: dict[str, Any] = {f: block[k] for f, k in _VISION_KEYS.items() if k in block}
    rope = block.get("rope_parameters") or {}
    if rope.get("rope_type", "axial") != "axial":
        raise ConfigError(
            source,
            f"key 'vision_config.rope_parameters.rope_type' = {rope['rope_type']!r}: "
            "expected axial",
        )
    values["rope_theta"] = rope.get("rope_theta", 10000.0)
    return as_vision_config(values, source, key="vision_config")


def read_layer_types(
    text: Mapping[str, Any],
    prefix: str,
    source: str,
    num_layers: int,
    kinds: Mapping[str, str] = _LAYER_KINDS,
    attention: str = "full_attention",
) -> tuple[str, ...]:
    """config.json's ``layer_types`` (or every ``full_attention_interval``-th) as kinds."""
    raw = text.get("layer_types")
    if raw is None:
        interval = text.get("full_attention_interval", 4)
        raw = [
            attention if (i + 1) % interval == 0 else "linear_attention" for i in range(num_layers)
        ]
    if not isinstance(raw, list) or len(raw) != num_layers:
        raise ConfigError(
            source, f"key '{prefix}layer_types' = {raw!r}: expected {num_layers} entries"
        )
    for kind in raw:
        if kind not in kinds:
            raise ConfigError(
                source,
                f"key '{prefix}layer_types' has {kind!r}; expected linear_attention or {attention}",
            )
    return tuple(kinds[k] for k in raw)


def _rows(start: int, stop: int):
    def take(tensors: Sequence[Tensor]) -> Tensor:
        return tensors[0][start:stop]

    return take


def _query_or_gate(num_heads: int, head_dim: int, which: int):
    """q_proj rows are [head][query | gate][head_dim]; keep one half of every head."""

    def take(tensors: Sequence[Tensor]) -> Tensor:
        weight = tensors[0]
        return weight.view(num_heads, 2, head_dim, weight.shape[-1])[:, which].reshape(
            num_heads * head_dim, weight.shape[-1]
        )

    return take


def _expert(index: int, start: int | None = None, stop: int | None = None):
    def take(tensors: Sequence[Tensor]) -> Tensor:
        return tensors[0][index, start:stop]

    return take


def _source(
    name: str,
    shape: tuple[int, ...],
    trunk: str,
    config: ModelConfig,
    tensor_names: frozenset[str],
) -> TensorSource:
    """Where internal parameter ``name`` comes from in a Qwen3.5 checkpoint."""
    if name.startswith("visual."):
        return TensorSource.same(FLAT_PREFIX + name, shape)
    full = name if name.startswith(("lm_head.", "mtp.")) else trunk + name
    base = full.rpartition(".")[0]
    block, _, module = base.rpartition(".")
    hidden = config.hidden_size
    if block.endswith(".linear_attn") and module in ("q_proj", "k_proj", "v_proj"):
        keys = config.num_linear_key_heads * config.linear_key_head_dim
        fused = (2 * keys + config.linear_num_heads * config.linear_value_head_dim, hidden)
        start = {"q_proj": 0, "k_proj": keys, "v_proj": 2 * keys}[module]
        return TensorSource(
            (f"{block}.in_proj_qkv.weight",), (fused,), _rows(start, start + shape[0])
        )
    if block.endswith(".linear_attn") and module in ("z_proj", "a_proj", "b_proj"):
        return TensorSource.same(f"{block}.in_proj_{module[0]}.weight", shape)
    if block.endswith(".self_attn") and module in ("q_proj", "g_proj"):
        heads, head_dim = config.num_attention_heads, config.head_dim
        which = 0 if module == "q_proj" else 1
        return TensorSource(
            (f"{block}.q_proj.weight",),
            ((2 * heads * head_dim, hidden),),
            _query_or_gate(heads, head_dim, which),
        )
    expert = re.fullmatch(r"(.*\.mlp\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)", base)
    if expert and f"{base}.weight" not in tensor_names:
        fused = _fused_expert_source(expert, config, tensor_names)
        if fused is not None:
            return fused
    return TensorSource.same(full, shape)


def _fused_expert_source(
    match: re.Match[str], config: ModelConfig, tensor_names: frozenset[str]
) -> TensorSource | None:
    """Expert E's projection from the fused [E, ...] tensors, when the checkpoint has them."""
    experts, index, proj = match.group(1), int(match.group(2)), match.group(3)
    size, hidden, width = config.num_experts, config.hidden_size, config.moe_intermediate_size
    fused_name = "gate_up_proj" if proj != "down_proj" else "down_proj"
    candidates = [f"{experts}.{fused_name}", f"{experts}.{fused_name}.weight"]
    found = next((c for c in candidates if c in tensor_names), None)
    if found is None:
        return None
    if proj == "down_proj":
        return TensorSource((found,), ((size, hidden, width),), _expert(index))
    start = 0 if proj == "gate_proj" else width
    return TensorSource(
        (found,), ((size, 2 * width, hidden),), _expert(index, start, start + width)
    )


QWEN3_5 = register(Qwen35Family())
QWEN3_5_MOE = register(Qwen35MoeFamily())
