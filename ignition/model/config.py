"""The model configuration shared by every family.

Every dimension of the model comes from here, so the same code serves the tiny test models
and a full-size one. Each family (``ignition.model.families``) parses its published
config.json into it, switching off what it lacks (hyper-connections, PLE, the indexer, the
MoE) and on what it adds (zero-centred norms, fewer GDN key heads than value heads, a dense
MLP). Validation happens once, when the config is built; an error names the file, the key and
the offending value so that a bad checkpoint fails at load rather than deep inside a matmul.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Any

from ignition.model.config_error import ConfigError
from ignition.model.config_parts import (
    GatedHyperConfig,
    IndexerConfig,
    NgramPleConfig,
    as_part,
)

LAYER_KINDS = ("gdn", "qsa")
MLP_KINDS = ("moe", "dense")


@dataclass(frozen=True)
class VisionConfig:
    """The optional vision encoder block (``ignition.model.vision.encoder``).

    The first four keys are required; the rest default to the Qwen3.5 tower's shape, and
    ``intermediate_size`` / ``out_hidden_size`` of 0 mean four times the width and the text
    hidden size (filled in by the family that reads the block).
    """

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    patch_size: int
    in_channels: int = 3
    intermediate_size: int = 0
    out_hidden_size: int = 0
    temporal_patch_size: int = 2
    spatial_merge_size: int = 2
    num_position_embeddings: int = 2304
    hidden_act: str = "gelu_pytorch_tanh"
    rope_theta: float = 10000.0

    def __post_init__(self) -> None:
        if not self.intermediate_size:
            object.__setattr__(self, "intermediate_size", 4 * self.hidden_size)


@dataclass(frozen=True)
class RopeScaling:
    """Llama 3 frequency scaling: long wavelengths slowed by ``factor``, a smooth band between."""

    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_max_position_embeddings: int


@dataclass(frozen=True)
class ModelConfig:
    """Every dimension of a model, validated when built.

    ``hc_streams`` counts the gated-residual hyper-connection streams (0: one plain residual
    stream; more needs ``gated_hyper``). The fields after ``torch_dtype`` say how a family
    departs from the defaults.
    """

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    layer_types: tuple[str, ...]
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rotary_dim: int
    rope_theta: float
    linear_num_heads: int
    linear_key_head_dim: int
    linear_value_head_dim: int
    conv_kernel: int
    num_experts: int
    num_experts_per_tok: int
    moe_intermediate_size: int
    shared_expert_intermediate_size: int
    hc_streams: int
    mtp_num_layers: int
    vision: VisionConfig | None
    rms_norm_eps: float
    max_position_embeddings: int
    tie_word_embeddings: bool
    bos_token_id: int | None = None
    eos_token_id: int | tuple[int, ...] | None = None
    pad_token_id: int | None = None
    image_token_id: int | None = None
    vision_start_token_id: int | None = None
    vision_end_token_id: int | None = None
    # interleaved multimodal rope: rotary frequency pairs per (temporal, height, width) axis;
    # None is plain rope (the three axes coincide for text anyway)
    mrope_section: tuple[int, int, int] | None = None
    torch_dtype: str = "float32"
    model_type: str = "qwen3_5_moe_text"
    linear_num_key_heads: int = 0  # 0: one GDN key head per value head (linear_num_heads)
    mlp_kind: str = "moe"
    # config.json's ``hidden_act``: the MLPs' (experts', shared expert's, MTP's) gate
    # activation and the GDN short convolution's, as transformers applies it
    # (``kernels.activations``; the GDN output gate and the PLE / hyper-connection SiLUs are
    # fixed by their architectures)
    hidden_act: str = "silu"
    intermediate_size: int = 0  # the dense MLP's width (mlp_kind "dense")
    mtp_mlp_kind: str = "dense"
    norm_offset: float = 0.0  # 1.0: zero-centred norms that scale by (1 + weight)
    attn_output_gate: bool = True
    qk_norm: bool = True
    rope_scaling: RopeScaling | None = None
    # True: a recursive draft step reads the previous MTP output after the MTP's final norm
    # (Qwen3.5 / Qwen3-Next, whose MTP returns normed states); False: before it.
    mtp_feeds_normed_hidden: bool = False
    # Qwen3.8-Flash-Next (qwen4_exp): the GDN output gate's activation, and the released parts
    gdn_gate_activation: str = "silu"
    gated_hyper: GatedHyperConfig | None = None
    ngram_ple: NgramPleConfig | None = None
    qsa_indexer: IndexerConfig | None = None
    # config.json's ``index_share_for_mtp_iteration`` (qwen4_exp, read as vLLM reads it): the
    # MTP's recursive draft steps after a round's first reuse that step's QSA selection
    # instead of scoring every block key again (``layers.qsa.DraftSelections``).
    index_share_for_mtp_iteration: bool = False

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def num_gdn_layers(self) -> int:
        return sum(kind == "gdn" for kind in self.layer_types)

    @property
    def num_qsa_layers(self) -> int:
        return sum(kind == "qsa" for kind in self.layer_types)

    @property
    def num_linear_key_heads(self) -> int:
        """GDN query/key heads; each serves linear_num_heads / this many value heads."""
        return self.linear_num_key_heads or self.linear_num_heads

    @property
    def conv_channels(self) -> int:
        """Channels of the GDN depthwise conv: q, k and v side by side."""
        keys = self.num_linear_key_heads * self.linear_key_head_dim
        return 2 * keys + self.linear_num_heads * self.linear_value_head_dim

    @property
    def mtp_intermediate_size(self) -> int:
        """A dense MTP SwiGLU is as wide as the trunk's dense MLP, else as the shared expert."""
        if self.mlp_kind == "dense":
            return self.intermediate_size
        return self.shared_expert_intermediate_size

    @property
    def num_ple_layers(self) -> int:
        return len(self.ngram_ple.layers) if self.ngram_ple else 0

    def ple_slot(self, layer_index: int) -> int | None:
        """The layer's index among PLE layers (its hash seed and state row), or None."""
        if self.ngram_ple is None or layer_index not in self.ngram_ple.layers:
            return None
        return self.ngram_ple.layers.index(layer_index)

    def layer_slot(self, layer_index: int) -> int:
        """Index of a layer among layers of its own kind (its row in stacked state)."""
        kind = self.layer_types[layer_index]
        return sum(k == kind for k in self.layer_types[:layer_index])

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["layer_types"] = list(self.layer_types)
        if isinstance(self.eos_token_id, tuple):
            out["eos_token_id"] = list(self.eos_token_id)
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], source: str = "<dict>") -> ModelConfig:
        known = {f.name for f in fields(cls)}
        required = sorted(f.name for f in fields(cls) if f.default is MISSING)
        for key in required:
            if key not in raw:
                raise ConfigError(source, f"missing key {key!r}")
        values = {k: v for k, v in raw.items() if k in known}
        values["layer_types"] = _as_layer_types(raw["layer_types"], source)
        values["vision"] = as_vision_config(raw["vision"], source)
        if isinstance(values.get("rope_scaling"), Mapping):
            values["rope_scaling"] = _as_rope_scaling(values["rope_scaling"], source)
        if isinstance(values.get("eos_token_id"), list):
            values["eos_token_id"] = tuple(values["eos_token_id"])
        if isinstance(values.get("mrope_section"), list):
            values["mrope_section"] = tuple(values["mrope_section"])
        for key, part in _PARTS.items():
            values[key] = as_part(part, values.get(key), key, source)
        try:
            return cls(**values)
        except ConfigError as exc:
            raise ConfigError(source, exc.detail) from None

    @classmethod
    def from_json(cls, path: str | Path) -> ModelConfig:
        path = Path(path)
        if path.is_dir():
            path = path / "config.json"
        return cls.from_dict(read_config_json(path), source=str(path))

    @classmethod
    def tiny(cls, **overrides: Any) -> ModelConfig:
        """A Qwen3.5-MoE hybrid (family ``qwen3_5_moe``): three GDN layers then one gated
        attention layer at hidden 64, four experts, one MTP layer; fast enough for CPU tests."""
        values: dict[str, Any] = dict(
            vocab_size=128,
            hidden_size=64,
            num_hidden_layers=4,
            layer_types=("gdn", "gdn", "gdn", "qsa"),
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            rotary_dim=8,
            rope_theta=10000.0,
            linear_num_heads=2,
            linear_key_head_dim=16,
            linear_value_head_dim=16,
            conv_kernel=4,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=32,
            hc_streams=0,
            mtp_num_layers=1,
            vision=None,
            rms_norm_eps=1e-6,
            max_position_embeddings=4096,
            tie_word_embeddings=False,
            bos_token_id=1,
            eos_token_id=2,
            pad_token_id=0,
            image_token_id=3,
            model_type="qwen3_5_moe_text",
            linear_num_key_heads=2,
            mtp_mlp_kind="moe",
            norm_offset=1.0,
            mtp_feeds_normed_hidden=True,
        )
        values.update(overrides)
        if "layer_types" in overrides and "num_hidden_layers" not in overrides:
            values["num_hidden_layers"] = len(values["layer_types"])
        return cls.from_dict(values, source="<tiny>")

    @classmethod
    def tiny_flash_next(cls, **overrides: Any) -> ModelConfig:
        """:meth:`tiny` as Qwen3.8-Flash-Next (family ``qwen4_exp``): two gated-residual
        streams, PLE n-grams on layer 1, QSA's indexer (a 16-token budget in blocks of 4), the
        gated MTP head."""
        values: dict[str, Any] = dict(
            model_type="qwen4_exp_text",
            hc_streams=2,
            mtp_feeds_normed_hidden=False,
            gdn_gate_activation="sigmoid",
            gated_hyper={"lowrank": 8},
            ngram_ple={
                "layers": [1],
                "embed_dim": 32,
                "conv_kernel": 3,
                "ngram_size": 3,
                "heads_per_ngram": 2,
                "vocab_size_base": 97,
                "vocab_size_divisor": 8,
                "seed": 11,
                "split_parts": 4,
            },
            qsa_indexer={"num_heads": 4, "head_dim": 16, "budget": 16, "compress_ratio": 4},
        )
        values.update(overrides)
        return cls.tiny(**values)


_PARTS = {
    "gated_hyper": GatedHyperConfig,
    "ngram_ple": NgramPleConfig,
    "qsa_indexer": IndexerConfig,
}


def _as_layer_types(value: Any, source: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not value:
        raise ConfigError(source, f"key 'layer_types' = {value!r}: must be a non-empty list")
    for kind in value:
        if kind not in LAYER_KINDS:
            raise ConfigError(
                source, f"key 'layer_types' has {kind!r}; expected one of {LAYER_KINDS}"
            )
    return tuple(value)


def _as_rope_scaling(value: Mapping[str, Any], source: str) -> RopeScaling:
    names = [f.name for f in fields(RopeScaling)]
    missing = [n for n in names if n not in value]
    if missing:
        raise ConfigError(source, f"key 'rope_scaling' lacks {missing[0]!r}")
    return RopeScaling(**{n: value[n] for n in names})


def as_vision_config(value: Any, source: str, key: str = "vision") -> VisionConfig | None:
    """A validated VisionConfig from a config.json block; errors name ``key`` and the field."""
    if value is None or isinstance(value, VisionConfig):
        return value
    if not isinstance(value, Mapping):
        raise ConfigError(source, f"key '{key}' = {value!r}: must be null or an object")
    names = {f.name for f in fields(VisionConfig)}
    try:
        vision = VisionConfig(**{k: v for k, v in value.items() if k in names})
    except TypeError as exc:
        raise ConfigError(source, f"key '{key}' is incomplete ({exc})") from exc
    for f in fields(VisionConfig):
        got = getattr(vision, f.name)
        if f.name == "hidden_act":
            from ignition.kernels.activations import ACTIVATIONS

            if got not in ACTIVATIONS:
                raise ConfigError(source, f"key '{key}.hidden_act' = {got!r}: unsupported")
            continue
        if f.name == "rope_theta":
            if not isinstance(got, int | float) or got <= 0:
                raise ConfigError(source, f"key '{key}.rope_theta' = {got!r}: must be positive")
            continue
        if f.name == "out_hidden_size" and got == 0:
            continue
        if not isinstance(got, int) or isinstance(got, bool) or got <= 0:
            raise ConfigError(source, f"key '{key}.{f.name}' = {got!r}: must be a positive int")
    return vision


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


def _validate(config: ModelConfig) -> None:
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


def _validate_parts(config: ModelConfig, eos_ids: tuple[int, ...], fail: Any) -> None:
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


def read_config_json(path: Path) -> dict[str, Any]:
    """A checkpoint's config.json as a dict, with one-line errors naming the file."""
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(str(path), "file not found") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(str(path), f"not valid JSON ({exc})") from exc
    if not isinstance(raw, dict):
        raise ConfigError(str(path), f"top level must be an object, not {type(raw).__name__}")
    return raw
