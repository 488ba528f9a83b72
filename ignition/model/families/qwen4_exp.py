"""Qwen3.8-Flash-Next as released (``qwen4_exp`` / ``qwen4_exp_text``), as Hugging Face lays it out.

Qwen3.5-MoE's trunk plus hyper-connections, PLE (shards concatenated; hash constants
recomputed) and QSA's indexer; the MTP head is read as vLLM reads it. Layout: docs/model.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from ignition.model.config import ConfigError, ModelConfig
from ignition.model.families.base import CheckpointLayout, ModelFamily, TensorSource
from ignition.model.families.hf_text import TextReader, text_section
from ignition.model.families.qwen3_5 import (
    FLAT_PREFIX,
    NESTED_PREFIX,
    _source,
    has_mtp,
    mtp_layer_count,
    read_layer_types,
    shared_text_values,
)
from ignition.model.families.registry import register

_LAYER_KINDS = {"linear_attention": "gdn", "indexed_attention": "qsa", "full_attention": "qsa"}
_QSA_KEYS = (
    "indexer_n_heads",
    "indexer_kv_heads",
    "indexer_head_dim",
    "indexer_budget",
    "indexer_compress_ratio",
)
_HASH_BUFFERS = ("layer_multipliers", "ngram_heads_offsets", "ngram_heads_vocab_sizes")
_RENAMED = {"attn_hc.": "attn_hyper_connection.", "mlp_hc.": "mlp_hyper_connection."}


class Qwen4ExpFamily(ModelFamily):
    name = "qwen4_exp"
    model_types = ("qwen4_exp", "qwen4_exp_text")
    recipe = "qwen38"
    description = "Qwen3.8-Flash-Next: GDN + QSA 3:1, MoE, gated hyper-connections, PLE n-grams"

    def parse_config(
        self, raw: Mapping[str, Any], source: str, tensor_names: frozenset[str]
    ) -> ModelConfig:
        text, prefix = text_section(raw, source)
        r = TextReader(text, prefix, source)
        r.unsupported_true("attention_bias")
        if text.get("norm_topk_prob", True) is not True:
            raise ConfigError(source, f"key '{prefix}norm_topk_prob' = false: expected true")
        num_layers = r.int("num_hidden_layers")
        layer_types = read_layer_types(
            text, prefix, source, num_layers, _LAYER_KINDS, "indexed_attention"
        )
        values = shared_text_values(
            self.model_types[0], raw, text, prefix, source, r, tensor_names, layer_types, 1.0
        )
        hidden = values["hidden_size"]
        # transformers: the GDN output gate is output_gate_type, else hidden_act
        gate = text.get("output_gate_type") or values["hidden_act"]
        if gate not in ("silu", "sigmoid"):
            key = "output_gate_type" if text.get("output_gate_type") else "hidden_act"
            raise ConfigError(
                source,
                f"key '{prefix}{key}' = {gate!r}: the GDN output gate's activation must be "
                "silu or sigmoid (set output_gate_type when hidden_act is another)",
            )
        values.update(
            num_experts=r.int("num_experts"),
            num_experts_per_tok=r.int("num_experts_per_tok"),
            moe_intermediate_size=r.int("moe_intermediate_size"),
            shared_expert_intermediate_size=r.int("shared_expert_intermediate_size"),
            mlp_kind="moe",
            mtp_mlp_kind="moe",
            hc_streams=r.int("hc_count", 4),
            mtp_num_layers=mtp_layer_count(tensor_names) if has_mtp(tensor_names) else 0,
            gdn_gate_activation=gate,
            gated_hyper={"lowrank": r.int("hc_lowrank", 320)},
            ngram_ple=_ple_block(text, r, prefix, source, num_layers, hidden),
            qsa_indexer=_indexer_block(text, prefix, source, layer_types),
            index_share_for_mtp_iteration=r.flag("index_share_for_mtp_iteration", False),
        )
        return ModelConfig.from_dict(values, source=source)

    def layout(self, model: nn.Module, tensor_names: frozenset[str]) -> CheckpointLayout:
        config: ModelConfig = model.config
        is_nested = any(n.startswith(NESTED_PREFIX) for n in tensor_names)
        trunk = NESTED_PREFIX if is_nested else FLAT_PREFIX
        sources = {}
        for name, param in model.named_parameters():
            shape = tuple(param.shape)
            if name.endswith(".ple.ngram_embedding.weight"):
                sources[name] = _table_source(trunk + name, shape, config, tensor_names)
                continue
            internal = name.replace("hc_mixer.", "hyper_connection_mixer.")
            for old, new in _RENAMED.items():
                internal = internal.replace(old, new)
            sources[name] = _source(internal, shape, trunk, config, tensor_names)
        ignored = ("mtp.embed_tokens.", "mtp.shared_head.")
        if not config.vision:
            ignored = (*ignored, "model.visual.")
        # saved constants recomputed here, and the mixers' unused injection weights
        suffixes = tuple(f".ple_embedding.{b}" for b in _HASH_BUFFERS)
        suffixes += ("hyper_connection_mixer.block_inject_weight",)
        return CheckpointLayout(sources, ignored_prefixes=ignored, ignored_suffixes=suffixes)

    def config_json(self, config: ModelConfig) -> dict[str, Any]:
        from ignition.model.families.lineage_json import (
            lineage_config_json,
            moe_keys,
            qwen4_exp_keys,
        )

        raw = lineage_config_json(config, "indexed_attention")
        return raw | moe_keys(config) | qwen4_exp_keys(config)

    def load_notes(self, config: ModelConfig, raw: Mapping[str, Any]) -> list[str]:
        notes = []
        if "vision_config" in raw and config.vision is None:
            notes.append("vision: no model.visual.* tensors in the checkpoint; text prompts only")
        return notes


def _ple_block(
    text: Mapping[str, Any],
    r: TextReader,
    prefix: str,
    source: str,
    num_layers: int,
    hidden: int,
) -> dict[str, Any] | None:
    """The PLE block from the flat keys; ``ple_layer_ids`` is one-indexed in config.json."""
    ids = text.get("ple_layer_ids") or []
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
        raise ConfigError(source, f"key '{prefix}ple_layer_ids' = {ids!r}: expected ints")
    bad = [i for i in ids if not 1 <= i <= num_layers]
    if bad:
        raise ConfigError(
            source, f"key '{prefix}ple_layer_ids' has {bad[0]}: layers are 1..{num_layers}"
        )
    if not ids:
        return None
    return {
        "layers": sorted({i - 1 for i in ids}),
        "embed_dim": r.int("ple_embed_dim", hidden) if text.get("ple_embed_dim") else hidden,
        "conv_kernel": r.int("ple_conv_kernel_size", 4),
        "ngram_size": r.int("ngram_size", 3),
        "heads_per_ngram": r.int("heads_per_ngram", 8),
        "vocab_size_base": r.int("ngram_vocab_size_base", 20_000_000),
        "vocab_size_divisor": r.int("make_ngram_vocab_size_divisible_by", 128),
        "seed": text.get("seed", 1234),
        "split_parts": r.int("split_ngram_parts", 512),
    }


def _indexer_block(
    text: Mapping[str, Any], prefix: str, source: str, layer_types: tuple[str, ...]
) -> dict[str, Any] | None:
    """QSA's indexer: required (all five keys) whenever the model has attention layers."""
    if "qsa" not in layer_types:
        return None
    for key in _QSA_KEYS:
        value = text.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            why = "missing" if value is None else f"= {value!r}, expected a positive int"
            raise ConfigError(source, f"key '{prefix}{key}' {why} (QSA indexer)")
    if text["indexer_kv_heads"] != 1:
        raise ConfigError(
            source, f"key '{prefix}indexer_kv_heads' = {text['indexer_kv_heads']}: expected 1"
        )
    return {
        "num_heads": text["indexer_n_heads"],
        "head_dim": text["indexer_head_dim"],
        "budget": text["indexer_budget"],
        "compress_ratio": text["indexer_compress_ratio"],
    }


def shard_rows(num_rows: int, num_parts: int) -> list[int]:
    """Rows of each ``shard_N`` piece (torch.chunk's split: maybe fewer pieces than parts)."""
    size = -(-num_rows // num_parts)
    return [min(size, num_rows - start) for start in range(0, num_rows, size)]


def _table_source(
    name: str, shape: tuple[int, ...], config: ModelConfig, tensor_names: frozenset[str]
) -> TensorSource:
    """A PLE table: one tensor, or the concatenation of its row shards in order."""
    stem = name.replace(".ple.ngram_embedding.weight", ".ple.ple_embedding.ngram_embedding")
    if f"{stem}.weight" in tensor_names:
        return TensorSource.same(f"{stem}.weight", shape)
    assert config.ngram_ple is not None
    rows = shard_rows(shape[0], config.ngram_ple.split_parts)
    names = tuple(f"{stem}.shard_{i}.weight" for i in range(len(rows)))
    shapes = tuple((n, shape[1]) for n in rows)
    return TensorSource(names, shapes, _concat_rows)


def _concat_rows(tensors: Sequence[Tensor]) -> Tensor:
    return torch.cat(list(tensors), dim=0)


QWEN4_EXP = register(Qwen4ExpFamily())
