"""Cross-field rules of a ModelConfig, checked once when it is built."""

from __future__ import annotations

from typing import Any

from ignition.model.config_error import ConfigError

MLP_KINDS = ("moe", "dense")

_POSITIVE_INTS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "linear_num_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "conv_kernel",
    "max_position_embeddings",
)
_MOE_INTS = (
    "num_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
)
_NON_NEGATIVE_INTS = (
    "rotary_dim",
    "mtp_num_layers",
    "hc_streams",
    "linear_num_key_heads",
    "intermediate_size",
)
_DTYPES = ("float32", "bfloat16", "float16")


def validate_config(config: Any) -> None:
    """Check a ModelConfig (typed Any: this module sits below config.py)."""

    def fail(key: str, value: Any, why: str) -> None:
        raise ConfigError("<config>", f"key {key!r} = {value!r}: {why}")

    for key in _POSITIVE_INTS:
        value = getattr(config, key)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            fail(key, value, "must be a positive integer")
    for key in _NON_NEGATIVE_INTS:
        value = getattr(config, key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            fail(key, value, "must be a non-negative integer")
    for key, value in (("mlp_kind", config.mlp_kind), ("mtp_mlp_kind", config.mtp_mlp_kind)):
        if value not in MLP_KINDS:
            fail(key, value, f"must be one of {MLP_KINDS}")
    if "moe" in (config.mlp_kind, config.mtp_mlp_kind):
        for key in _MOE_INTS:
            value = getattr(config, key)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                fail(key, value, "must be a positive integer (the model has experts)")
    if config.mlp_kind == "dense" and config.intermediate_size <= 0:
        fail("intermediate_size", config.intermediate_size, "must be positive for a dense MLP")
    if config.linear_num_heads % config.num_linear_key_heads:
        fail(
            "linear_num_key_heads",
            config.linear_num_key_heads,
            f"must divide the value heads ({config.linear_num_heads})",
        )
    for key in ("rope_theta", "rms_norm_eps"):
        value = getattr(config, key)
        if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
            fail(key, value, "must be a positive number")
    for key in ("tie_word_embeddings", "index_share_for_mtp_iteration"):
        if not isinstance(getattr(config, key), bool):
            fail(key, getattr(config, key), "must be true or false")
    if config.index_share_for_mtp_iteration and config.qsa_indexer is None:
        fail("index_share_for_mtp_iteration", True, "needs a QSA indexer (qsa_indexer)")
    if len(config.layer_types) != config.num_hidden_layers:
        fail(
            "layer_types",
            list(config.layer_types),
            f"has {len(config.layer_types)} entries but num_hidden_layers is "
            f"{config.num_hidden_layers}",
        )
    if config.conv_kernel < 2:
        fail("conv_kernel", config.conv_kernel, "must be at least 2 (the window keeps K - 1)")
    if config.num_attention_heads % config.num_key_value_heads:
        fail(
            "num_key_value_heads",
            config.num_key_value_heads,
            f"must divide num_attention_heads ({config.num_attention_heads})",
        )
    if config.rotary_dim > config.head_dim or config.rotary_dim % 2:
        fail("rotary_dim", config.rotary_dim, f"must be even and <= head_dim ({config.head_dim})")
    section = config.mrope_section
    if section is not None and (
        len(section) != 3
        or not all(isinstance(v, int) and v >= 0 for v in section)
        or sum(section) != config.rotary_dim // 2
    ):
        fail("mrope_section", section, f"must be three counts summing to {config.rotary_dim // 2}")
    if config.mlp_kind == "moe" and config.num_experts_per_tok > config.num_experts:
        fail(
            "num_experts_per_tok",
            config.num_experts_per_tok,
            f"must be <= num_experts ({config.num_experts})",
        )
    if config.torch_dtype not in _DTYPES:
        fail("torch_dtype", config.torch_dtype, f"must be one of {_DTYPES}")
    for key in (
        "bos_token_id",
        "pad_token_id",
        "image_token_id",
        "vision_start_token_id",
        "vision_end_token_id",
    ):
        value = getattr(config, key)
        if value is not None and not (isinstance(value, int) and 0 <= value < config.vocab_size):
            fail(key, value, f"must be null or a token id below vocab_size ({config.vocab_size})")
    eos = config.eos_token_id
    eos_ids = eos if isinstance(eos, tuple) else () if eos is None else (eos,)
    for token in eos_ids:
        if not isinstance(token, int) or not 0 <= token < config.vocab_size:
            fail("eos_token_id", eos, f"ids must be below vocab_size ({config.vocab_size})")
    _validate_parts(config, eos_ids, fail)


def _validate_parts(config: Any, eos_ids: tuple[int, ...], fail: Any) -> None:
    """The released parts' cross-field rules (each part checked its own fields)."""
    from ignition.kernels.activations import ACTIVATIONS  # torch: only when a config is built

    if config.hidden_act not in ACTIVATIONS:
        fail("hidden_act", config.hidden_act, f"expected one of {', '.join(ACTIVATIONS)}")
    if config.gdn_gate_activation not in ("silu", "sigmoid"):
        fail("gdn_gate_activation", config.gdn_gate_activation, "must be silu or sigmoid")
    if config.gated_hyper is not None and config.hc_streams < 2:
        fail("hc_streams", config.hc_streams, "gated hyper-connections need at least 2 streams")
    if config.gated_hyper is None and config.hc_streams:
        fail("hc_streams", config.hc_streams, "streams need gated_hyper (0: one plain stream)")
    ple = config.ngram_ple
    if ple is not None:
        for layer in ple.layers:
            if layer >= config.num_hidden_layers or config.layer_types[layer] != "gdn":
                fail("ngram_ple.layers", list(ple.layers), "must name linear-attention layers")
        if not eos_ids:
            fail("eos_token_id", config.eos_token_id, "PLE n-grams need an EOS id")
        if config.gated_hyper is None:
            fail("ngram_ple", "set", "PLE needs gated hyper-connections (one key per stream)")
    index = config.qsa_indexer
    if index is not None and config.rotary_dim > index.head_dim:
        fail(
            "qsa_indexer.head_dim",
            index.head_dim,
            f"must hold the rotary dims ({config.rotary_dim})",
        )
