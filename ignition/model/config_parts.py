"""The optional Qwen3.8-Flash-Next parts of a :class:`ModelConfig` (None where absent)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any, TypeVar

from ignition.model.config_error import ConfigError


@dataclass(frozen=True)
class GatedHyperConfig:
    """Gated-residual hyper-connections over ``hc_streams`` streams (rank of the input mix)."""

    lowrank: int


@dataclass(frozen=True)
class NgramPleConfig:
    """Hashed n-gram per-layer embeddings ("Engram") on the zero-indexed ``layers``."""

    layers: tuple[int, ...]
    embed_dim: int  # all n-gram heads' rows concatenated
    conv_kernel: int
    ngram_size: int
    heads_per_ngram: int
    vocab_size_base: int
    vocab_size_divisor: int
    seed: int
    split_parts: int = 1  # row shards of each table in the checkpoint (split_ngram_parts)

    @property
    def num_heads(self) -> int:
        """Hashed heads per PLE layer: ``heads_per_ngram`` for each order 2..ngram_size."""
        return (self.ngram_size - 1) * self.heads_per_ngram

    @property
    def head_dim(self) -> int:
        return self.embed_dim // self.num_heads

    @property
    def context_len(self) -> int:
        """Token ids a request carries between steps: the n-gram's earlier members."""
        return self.ngram_size - 1

    @property
    def window_len(self) -> int:
        """Positions the dilated convolution reaches back: (kernel - 1) x dilation."""
        return (self.conv_kernel - 1) * self.ngram_size


@dataclass(frozen=True)
class IndexerConfig:
    """QSA's token indexer: which compressed key blocks each query attends to."""

    num_heads: int
    head_dim: int
    budget: int  # tokens taken from complete blocks
    compress_ratio: int  # raw keys averaged into one block key

    @property
    def num_blocks(self) -> int:
        """Complete blocks a query keeps once more than ``budget`` tokens are visible."""
        return self.budget // self.compress_ratio


Part = TypeVar("Part", GatedHyperConfig, NgramPleConfig, IndexerConfig)


def as_part(cls: type[Part], value: Any, key: str, source: str) -> Part | None:
    """A validated part from its config.json block (or the part itself); None stays None."""
    if value is None or isinstance(value, cls):
        return value
    if not isinstance(value, Mapping):
        raise ConfigError(source, f"key '{key}' = {value!r}: must be null or an object")
    missing = [f.name for f in fields(cls) if f.name not in value and f.default is MISSING]
    if missing:
        raise ConfigError(source, f"key '{key}' lacks {missing[0]!r}")
    values = {f.name: value[f.name] for f in fields(cls) if f.name in value}
    if "layers" in values:
        values["layers"] = tuple(values["layers"])
    for name, got in values.items():
        items = got if isinstance(got, tuple) else (got,)
        for item in items:
            is_int = isinstance(item, int) and not isinstance(item, bool)
            if not is_int or item < 0 or (item == 0 and name not in ("layers", "seed")):
                raise ConfigError(source, f"key '{key}.{name}' = {got!r}: must be a positive int")
    part = cls(**values)
    _check_part(part, key, source)
    return part


def _check_part(part: Any, key: str, source: str) -> None:
    if isinstance(part, NgramPleConfig) and part.embed_dim % part.num_heads:
        raise ConfigError(
            source,
            f"key '{key}.embed_dim' = {part.embed_dim}: must divide into the "
            f"{part.num_heads} n-gram heads",
        )
    if isinstance(part, NgramPleConfig) and part.ngram_size < 2:
        raise ConfigError(source, f"key '{key}.ngram_size' = {part.ngram_size}: must be >= 2")
    if isinstance(part, IndexerConfig) and part.budget % part.compress_ratio:
        raise ConfigError(
            source,
            f"key '{key}.budget' = {part.budget}: must be a multiple of compress_ratio "
            f"({part.compress_ratio})",
        )
