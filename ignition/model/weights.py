"""Safetensors checkpoints in the Hugging Face layout, loaded through their model family.

``config.json``'s ``model_type`` picks the family (``ignition.model.families``), which parses
the config into the shared :class:`Qwen38Config` and maps every model parameter to the
checkpoint tensors it is made from (fused projections are split there). Loading checks
every mapped tensor for presence and shape, and that nothing unmapped is left over, before
copying any, and names the first mismatch, so a wrong checkpoint is rejected whole. Weights
may be one file or shards listed by ``model.safetensors.index.json``.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ignition.model.config import Qwen38Config
from ignition.model.families.base import CheckpointLayout, ModelFamily
from ignition.model.families.qwen38 import checkpoint_name
from ignition.model.families.registry import family_for_checkpoint, read_config_json
from ignition.model.model import HybridModel

WEIGHTS_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
CONFIG_FILE = "config.json"
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

__all__ = [
    "CONFIG_FILE",
    "WEIGHTS_FILE",
    "LoadedCheckpoint",
    "WeightsError",
    "check_layout",
    "checkpoint_name",
    "expected_tensors",
    "load_checkpoint",
    "load_model",
    "random_model",
    "write_random_checkpoint",
]


class WeightsError(ValueError):
    """A checkpoint whose tensors do not match what its config.json describes."""


@dataclass
class LoadedCheckpoint:
    """A loaded model, the family that read it and the one-line notes worth printing."""

    model: HybridModel
    family: ModelFamily
    notes: list[str] = field(default_factory=list)


def expected_tensors(model: HybridModel) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """Qwen3.8 name -> (shape, dtype) of every tensor its checkpoint holds, in module order."""
    dtype = _DTYPES[model.config.torch_dtype]
    # named_parameters drops the tied lm_head (it is the embedding), as HF checkpoints do.
    return {
        checkpoint_name(name): (tuple(param.shape), dtype)
        for name, param in model.named_parameters()
    }


def locate_tensors(path: Path) -> dict[str, Path]:
    """Checkpoint tensor name -> the safetensors file that holds it (index or every file)."""
    index = path / INDEX_FILE
    if index.exists():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise WeightsError(f"{index}: not a safetensors index ({exc})") from None
        located = {name: path / file for name, file in weight_map.items()}
        for file in sorted(set(located.values())):
            if not file.exists():
                raise WeightsError(f"{index}: shard {file.name} is missing")
        return located
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise WeightsError(f"{path}: no *.safetensors file")
    located = {}
    for file in files:
        with safe_open(file, framework="pt") as handle:
            for name in handle.keys():  # noqa: SIM118 (safe_open is not a mapping)
                located.setdefault(name, file)
    return located


def load_checkpoint(path: str | Path, device: torch.device | str = "cpu") -> LoadedCheckpoint:
    """Build the model described by ``path``/config.json through its family, weights checked."""
    path = Path(path)
    family = family_for_checkpoint(path)
    raw = read_config_json(path / CONFIG_FILE)
    located = locate_tensors(path)
    config = family.parse_config(raw, str(path / CONFIG_FILE), frozenset(located))
    with torch.device("meta"):
        model = family.model_class()(config)
    model = model.to_empty(device=device).to(_DTYPES[config.torch_dtype])
    model.tie_weights()
    layout = family.layout(model, frozenset(located))
    _load_layout(model, path, located, layout, strict_dtype=family.name == "qwen38")
    return LoadedCheckpoint(model.eval(), family, family.load_notes(config, raw))


def load_model(path: str | Path, device: torch.device | str = "cpu") -> HybridModel:
    """Build the model described by ``path``/config.json and load its weights (checked)."""
    return load_checkpoint(path, device).model


def load_weights(model: HybridModel, path: str | Path) -> None:
    """Load a Qwen3.8 Flash checkpoint's tensors into ``model`` (checked first)."""
    path = Path(path)
    located = locate_tensors(path)
    from ignition.model.families.qwen38 import QWEN38

    _load_layout(model, path, located, QWEN38.layout(model, frozenset(located)), True)


def _load_layout(
    model: HybridModel,
    path: Path,
    located: dict[str, Path],
    layout: CheckpointLayout,
    strict_dtype: bool,
) -> None:
    """Check the layout (:func:`check_layout`), then copy."""
    used = check_layout(model, path, located, layout, strict_dtype)
    params = dict(model.named_parameters())
    cache: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for name, source in layout.sources.items():
            param = params[name]
            tensors = []
            for tensor_name in source.names:
                if tensor_name not in cache:
                    with safe_open(located[tensor_name], framework="pt") as handle:
                        cache[tensor_name] = handle.get_tensor(tensor_name)
                tensors.append(cache[tensor_name])
                used[tensor_name] -= 1
                if used[tensor_name] == 0:  # last reader: free fused tensors early
                    del used[tensor_name]
            param.copy_(source.build(tensors).to(param.dtype))
            for tensor_name in source.names:
                if tensor_name not in used:
                    cache.pop(tensor_name, None)


def check_layout(
    model: HybridModel,
    path: Path,
    located: dict[str, Path],
    layout: CheckpointLayout,
    strict_dtype: bool,
) -> Counter[str]:
    """Check every source tensor (presence, shape, dtype; headers only) and that nothing is
    left over; returns how many parameters read each tensor. ``model`` may be on meta."""
    dtype = _DTYPES[model.config.torch_dtype]
    used: Counter[str] = Counter()
    shard_names: dict[Path, set[str]] = {}
    for source in layout.sources.values():
        for name, shape in zip(source.names, source.shapes, strict=True):
            if name not in located:
                raise WeightsError(
                    f"{path}: missing tensor {name!r} (expected {list(shape)} {dtype})"
                )
            if name in used:
                used[name] += 1
                continue
            used[name] += 1
            with safe_open(located[name], framework="pt") as handle:
                if located[name] not in shard_names:
                    shard_names[located[name]] = set(handle.keys())
                if name not in shard_names[located[name]]:  # an index naming the wrong shard
                    raise WeightsError(f"{located[name]}: the index places {name!r} here; absent")
                piece = handle.get_slice(name)
                got_shape = tuple(piece.get_shape())
                got_dtype = _safetensors_dtype(piece.get_dtype())
            if got_shape != tuple(shape):
                raise WeightsError(
                    f"{located[name]}: tensor {name!r} has shape {list(got_shape)}, "
                    f"expected {list(shape)}"
                )
            if got_dtype != dtype and (strict_dtype or got_dtype not in _DTYPES.values()):
                raise WeightsError(
                    f"{located[name]}: tensor {name!r} has dtype {got_dtype}, expected {dtype}"
                )
    ignored = layout.ignored_prefixes
    if model.config.tie_word_embeddings:
        ignored = (*ignored, "lm_head.")  # a tied head some savers still write out
    unexpected = sorted(
        n
        for n in set(located) - set(used)
        if not n.startswith(ignored) and not n.endswith(layout.ignored_suffixes)
    )
    if unexpected:
        raise WeightsError(
            f"{path}: unexpected tensor {unexpected[0]!r} ({len(unexpected)} in all)"
        )
    return used


def _safetensors_dtype(name: str) -> torch.dtype | str:
    return {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}.get(name, name)


@torch.no_grad()
def randomize_(model: HybridModel, seed: int) -> HybridModel:
    """Random weights with non-trivial gates, mixes and decays (identity-like init hides bugs)."""
    generator = torch.Generator().manual_seed(seed)

    def normal(shape: torch.Size, std: float, mean: float = 0.0) -> torch.Tensor:
        return torch.randn(shape, generator=generator) * std + mean

    for name, param in model.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        if name.endswith(("embed_tokens.weight", "ple.embed.weight")):
            value = normal(param.shape, 1.0)
        elif name.endswith("lm_head.weight"):
            value = normal(param.shape, 3.0 / math.sqrt(param.shape[1]))
        elif "norm" in name:
            value = normal(param.shape, 0.1, 1.0)
        elif leaf == "A_log":
            value = torch.rand(param.shape, generator=generator) * 2.0 - 1.0
        elif leaf == "dt_bias":
            value = normal(param.shape, 0.5)
        elif leaf == "read_weight":
            value = normal(param.shape, 0.2, 1.0 / param.shape[0])
        elif leaf == "mix_weight":
            value = torch.eye(param.shape[0]) + normal(param.shape, 0.1)
        elif leaf == "write_weight":
            value = normal(param.shape, 0.2, 1.0)
        elif leaf == "weight" and param.dim() >= 2:
            fan_in = param.shape[1] * (param.shape[2] if param.dim() == 3 else 1)
            value = normal(param.shape, 1.0 / math.sqrt(fan_in))
        else:
            value = normal(param.shape, 0.1)
        param.copy_(value.to(param.dtype))
    return model


def random_model(config: Qwen38Config, seed: int = 0) -> HybridModel:
    """A Qwen3.8 Flash-layout model with random weights (tests and the tiny trainer)."""
    return randomize_(HybridModel(config), seed).to(_DTYPES[config.torch_dtype]).eval()


def write_random_checkpoint(path: str | Path, config: Qwen38Config, seed: int = 0) -> Path:
    """Write config.json and model.safetensors of a random model of ``config`` (for tests)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model = random_model(config, seed)
    (path / CONFIG_FILE).write_text(json.dumps(config.to_dict(), indent=2) + "\n")
    tensors = {
        checkpoint_name(name): param.detach().contiguous()
        for name, param in model.named_parameters()
    }
    save_file(tensors, str(path / WEIGHTS_FILE))
    return path
