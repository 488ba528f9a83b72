"""The model configuration shared by every family, validated once when built."""

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
from ignition.model.config_validate import validate_config
from ignition.model.config_vision import VisionConfig, as_vision_config

LAYER_KINDS = ("gdn", "qsa")


@dataclass(frozen=True)
class RopeScaling:
    """Llama 3 frequency scaling: long wavelengths slowed by ``factor``, a smooth band between."""

    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_max_position_embeddings: int


@dataclass(frozen=True)
class ModelConfig:
    """Every dimension of a model. ``hc_streams``: hyper-connection streams (0: one plain
    residual stream). Fields after ``torch_dtype`` are family departures from the defaults."""

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
    # multimodal rope: frequency pairs per (t, h, w) axis; None: plain rope
    mrope_section: tuple[int, int, int] | None = None
    torch_dtype: str = "float32"
    model_type: str = "qwen3_5_moe_text"
    linear_num_key_heads: int = 0  # 0: one GDN key head per value head (linear_num_heads)
    mlp_kind: str = "moe"
    # the MLPs' and the GDN conv's activation (``kernels.activations``)
    hidden_act: str = "silu"
    intermediate_size: int = 0  # the dense MLP's width (mlp_kind "dense")
    mtp_mlp_kind: str = "dense"
    norm_offset: float = 0.0  # 1.0: zero-centred norms that scale by (1 + weight)
    attn_output_gate: bool = True
    qk_norm: bool = True
    rope_scaling: RopeScaling | None = None
    # a recursive draft step reads the previous MTP output after (True) its final norm
    mtp_feeds_normed_hidden: bool = False
    # Qwen3.8-Flash-Next (qwen4_exp): the GDN output gate's activation, and the released parts
    gdn_gate_activation: str = "silu"
    gated_hyper: GatedHyperConfig | None = None
    ngram_ple: NgramPleConfig | None = None
    qsa_indexer: IndexerConfig | None = None
    # later MTP draft steps reuse the first step's QSA selection (``layers.qsa.DraftSelections``)
    index_share_for_mtp_iteration: bool = False

    def __post_init__(self) -> None:
        validate_config(self)

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
        """A tiny Qwen3.5-MoE hybrid (three GDN layers, one attention layer, MTP) for CPU tests."""
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
        """:meth:`tiny` as Qwen3.8-Flash-Next (``qwen4_exp``): hyper-connections, PLE, indexer."""
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
