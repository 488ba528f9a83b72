"""The seam between a published checkpoint layout and the shared model code: one file per family."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

from ignition.model.config import ConfigError, ModelConfig

Shape = tuple[int, ...]


@dataclass(frozen=True)
class TensorSource:
    """Checkpoint tensors (name, expected shape) and how they become one parameter;
    ``combine`` gets them in ``names`` order (None: the single tensor as it is)."""

    names: tuple[str, ...]
    shapes: tuple[Shape, ...]
    combine: Callable[[Sequence[Tensor]], Tensor] | None = None

    @classmethod
    def same(cls, name: str, shape: Sequence[int]) -> TensorSource:
        return cls((name,), (tuple(shape),))

    def build(self, tensors: Sequence[Tensor]) -> Tensor:
        return tensors[0] if self.combine is None else self.combine(tensors)


@dataclass(frozen=True)
class CheckpointLayout:
    """What a family reads from one checkpoint: parameter sources and names to skip."""

    sources: dict[str, TensorSource]  # internal parameter name -> where it comes from
    ignored_prefixes: tuple[str, ...] = ()  # checkpoint names loaded elsewhere, if at all
    ignored_suffixes: tuple[str, ...] = ()  # saved constants the model recomputes


class ModelFamily:
    """One published model family; subclasses fill in the class attributes and two methods."""

    name: str = ""
    model_types: tuple[str, ...] = ()  # config.json ``model_type`` values this family reads
    recipe: str = ""  # the recipe that serves it when ``ignition build`` names none
    description: str = ""

    def model_class(self) -> type[nn.Module]:
        from ignition.model.model import HybridModel

        return HybridModel

    def parse_config(
        self, raw: Mapping[str, Any], source: str, tensor_names: frozenset[str]
    ) -> ModelConfig:
        """The shared config from config.json (tensor names say which optional parts exist)."""
        raise NotImplementedError

    def layout(self, model: nn.Module, tensor_names: frozenset[str]) -> CheckpointLayout:
        raise NotImplementedError

    def config_json(self, config: ModelConfig) -> dict[str, Any]:
        """The config.json this family would read as ``config`` (random test checkpoints)."""
        raise NotImplementedError(f"family {self.name!r} writes no config.json")

    def load_notes(self, config: ModelConfig, raw: Mapping[str, Any]) -> list[str]:
        """One-line notes the build prints (parts skipped, features switched off)."""
        return []


def require(raw: Mapping[str, Any], key: str, source: str, kind: type | tuple = int) -> Any:
    """``raw[key]`` of the given type, or a ConfigError naming the file and the key."""
    if key not in raw:
        raise ConfigError(source, f"missing key {key!r}")
    value = raw[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise ConfigError(source, f"key {key!r} = {value!r}: expected {names}")
    return value


def as_dtype(raw: Mapping[str, Any], source: str, default: str = "float32") -> str:
    """``dtype`` (transformers 5) or ``torch_dtype`` (older saves) of a config.json."""
    value = raw.get("dtype", raw.get("torch_dtype", default))
    if value not in ("float32", "bfloat16", "float16"):
        raise ConfigError(source, f"key 'dtype' = {value!r}: expected float32, bfloat16 or float16")
    return value
