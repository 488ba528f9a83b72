"""The optional vision encoder's configuration block, parsed and checked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ignition.model.config_error import ConfigError


@dataclass(frozen=True)
class VisionConfig:
    """The optional vision encoder block; ``intermediate_size`` / ``out_hidden_size`` 0 mean
    four times the width / the text hidden size."""

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
