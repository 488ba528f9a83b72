"""config.json of the Qwen3.5 lineage written from a :class:`ModelConfig` (the inverse of
``parse_config``, for random test checkpoints); what it cannot state is refused."""

from __future__ import annotations

from typing import Any

from ignition.model.config import ConfigError, ModelConfig


def lineage_config_json(config: ModelConfig, attention_name: str) -> dict[str, Any]:
    """The flat text config.json keys every family of the lineage reads alike."""
    if config.vision is not None:
        raise ConfigError("<config>", "field 'vision': written checkpoints are text-only")
    if config.norm_offset != 1.0:
        raise ConfigError("<config>", f"field 'norm_offset' = {config.norm_offset}: expected 1.0")
    kinds = {"gdn": "linear_attention", "qsa": attention_name}
    eos = config.eos_token_id
    rope: dict[str, Any] = {
        "rope_type": "default",
        "rope_theta": config.rope_theta,
        "partial_rotary_factor": config.rotary_dim / config.head_dim,
    }
    if config.mrope_section is not None:
        rope["mrope_section"] = list(config.mrope_section)
    return {
        "model_type": config.model_type,
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "num_hidden_layers": config.num_hidden_layers,
        "layer_types": [kinds[kind] for kind in config.layer_types],
        "num_attention_heads": config.num_attention_heads,
        "num_key_value_heads": config.num_key_value_heads,
        "head_dim": config.head_dim,
        "rope_parameters": rope,
        "linear_num_value_heads": config.linear_num_heads,
        "linear_num_key_heads": config.num_linear_key_heads,
        "linear_key_head_dim": config.linear_key_head_dim,
        "linear_value_head_dim": config.linear_value_head_dim,
        "linear_conv_kernel_dim": config.conv_kernel,
        "rms_norm_eps": config.rms_norm_eps,
        "hidden_act": config.hidden_act,
        "max_position_embeddings": config.max_position_embeddings,
        "tie_word_embeddings": config.tie_word_embeddings,
        "dtype": config.torch_dtype,
        "bos_token_id": config.bos_token_id,
        "eos_token_id": list(eos) if isinstance(eos, tuple) else eos,
        "pad_token_id": config.pad_token_id,
        "image_token_id": config.image_token_id,
    }


def moe_keys(config: ModelConfig) -> dict[str, Any]:
    return {
        "num_experts": config.num_experts,
        "num_experts_per_tok": config.num_experts_per_tok,
        "moe_intermediate_size": config.moe_intermediate_size,
        "shared_expert_intermediate_size": config.shared_expert_intermediate_size,
    }


def qwen4_exp_keys(config: ModelConfig) -> dict[str, Any]:
    """Qwen3.8-Flash-Next's own keys: streams, PLE (one-indexed layers), the indexer."""
    if config.gated_hyper is None or config.qsa_indexer is None:
        raise ConfigError("<config>", "field 'gated_hyper'/'qsa_indexer': qwen4_exp needs both")
    index, ple = config.qsa_indexer, config.ngram_ple
    keys: dict[str, Any] = {
        "output_gate_type": config.gdn_gate_activation,
        "hc_count": config.hc_streams,
        "hc_lowrank": config.gated_hyper.lowrank,
        "indexer_n_heads": index.num_heads,
        "indexer_kv_heads": 1,
        "indexer_head_dim": index.head_dim,
        "indexer_budget": index.budget,
        "indexer_compress_ratio": index.compress_ratio,
        "ple_layer_ids": [] if ple is None else [layer + 1 for layer in ple.layers],
        "index_share_for_mtp_iteration": config.index_share_for_mtp_iteration,
    }
    if ple is not None:
        keys.update(
            ple_embed_dim=ple.embed_dim,
            ple_conv_kernel_size=ple.conv_kernel,
            ngram_size=ple.ngram_size,
            heads_per_ngram=ple.heads_per_ngram,
            ngram_vocab_size_base=ple.vocab_size_base,
            make_ngram_vocab_size_divisible_by=ple.vocab_size_divisor,
            seed=ple.seed,
            split_ngram_parts=ple.split_parts,
        )
    return keys
