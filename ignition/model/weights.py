"""Safetensors checkpoints in the Hugging Face layout, loaded through their model family.

Every mapped tensor is checked (presence, shape, nothing left over) before any is copied, so
a wrong checkpoint is rejected whole with the first mismatch named. Block-FP8 is dequantised
as read (``ignition.model.quant``); other quantisation is refused.
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

from ignition.model.checkpoint_files import WeightsError, locate_tensors, read_tensor
from ignition.model.config import ModelConfig
from ignition.model.families.base import CheckpointLayout, ModelFamily
from ignition.model.families.registry import (
    family_for_checkpoint,
    family_for_model_type,
    read_config_json,
)
from ignition.model.model import HybridModel
from ignition.model.quant import FP8_DTYPE, Fp8Plan, plan_fp8, read_quantization
from ignition.model.row_products import use_row_products

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

__all__ = [
    "CONFIG_FILE",
    "WEIGHTS_FILE",
    "LoadedCheckpoint",
    "WeightsError",
    "check_layout",
    "checkpoint_tensors",
    "drop_ple_tables",
    "load_checkpoint",
    "load_model",
    "locate_tensors",
    "random_model",
    "write_random_checkpoint",
]


@dataclass
class LoadedCheckpoint:
    """A loaded model, the family that read it and the one-line notes worth printing."""

    model: HybridModel
    family: ModelFamily
    notes: list[str] = field(default_factory=list)


def load_checkpoint(
    path: str | Path, device: torch.device | str = "cpu", *, without_ple_tables: bool = False
) -> LoadedCheckpoint:
    """Build the model described by ``path``/config.json through its family, weights checked.

    ``without_ple_tables``: PLE n-gram tables are checked but not allocated or read (zero-row
    tables, :func:`drop_ple_tables`); the runtime serves their rows (``runtime.ple``)."""
    path = Path(path)
    family = family_for_checkpoint(path)
    raw = read_config_json(path / CONFIG_FILE)
    scheme = read_quantization(raw, path)  # refuses what cannot be dequantised, first
    located = locate_tensors(path)
    fp8 = plan_fp8(path / CONFIG_FILE, located, scheme)
    config = family.parse_config(raw, str(path / CONFIG_FILE), frozenset(located))
    with torch.device("meta"):
        model = family.model_class()(config)
        model.tie_weights()
        # the whole model's layout, tables included: a wrong checkpoint fails as it always did
        layout = family.layout(model, frozenset(located))
        unread = drop_ple_tables(model) if without_ple_tables else frozenset()
    model = model.to_empty(device=device).to(_DTYPES[config.torch_dtype])
    model.tie_weights()
    _load_layout(model, path, located, layout, fp8, unread)
    if torch.device(device).type == "cpu" and config.torch_dtype == "bfloat16":
        use_row_products(model)  # one-row bf16 projections through torch.mv (row_products)
    return LoadedCheckpoint(model.eval(), family, family.load_notes(config, raw))


def load_model(
    path: str | Path, device: torch.device | str = "cpu", *, without_ple_tables: bool = False
) -> HybridModel:
    """Build the model described by ``path``/config.json and load its weights (checked)."""
    return load_checkpoint(path, device, without_ple_tables=without_ple_tables).model


# A PLE layer's n-gram table: the one parameter a loader may leave unread.
PLE_TABLE_PARAMETER = ".ple.ngram_embedding.weight"


def drop_ple_tables(model: HybridModel) -> frozenset[str]:
    """Give every PLE layer a zero-row table; returns the dropped parameters' names."""
    from ignition.model.layers.ngram_ple import NgramPle

    names = frozenset(n for n, _ in model.named_parameters() if n.endswith(PLE_TABLE_PARAMETER))
    for module in model.modules():
        if isinstance(module, NgramPle):
            module.drop_table()
    return names


def _load_layout(
    model: HybridModel,
    path: Path,
    located: dict[str, Path],
    layout: CheckpointLayout,
    fp8: Fp8Plan | None = None,
    unread: frozenset[str] = frozenset(),
) -> None:
    """Check the layout, then copy (FP8 dequantised); ``unread`` parameters stay unread."""
    used = check_layout(model, path, located, layout, fp8=fp8)
    params = dict(model.named_parameters())
    cache: dict[str, torch.Tensor] = {}
    dtype = _DTYPES[model.config.torch_dtype]
    with torch.no_grad():
        for name, source in layout.sources.items():
            if name in unread:
                continue
            param = params[name]
            tensors = []
            for tensor_name in source.names:
                if tensor_name not in cache:
                    tensor = read_tensor(located, tensor_name)
                    if fp8 is not None:
                        tensor = fp8.dequantize(tensor_name, tensor, located, dtype)
                    cache[tensor_name] = tensor
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
    fp8: Fp8Plan | None = None,
) -> Counter[str]:
    """Check every source tensor (presence, shape, dtype; headers only) and that nothing is
    left over; returns how many parameters read each tensor. ``model`` may be on meta. FP8
    needs its ``fp8`` plan; other float dtypes convert on read; non-floating is refused."""
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
            if got_dtype == FP8_DTYPE and (fp8 is None or name not in fp8.scales):
                raise WeightsError(
                    f"{located[name]}: tensor {name!r} is {FP8_DTYPE}; only the one-device "
                    "loader dequantises FP8 checkpoints"
                )
            is_float = got_dtype in _DTYPES.values()
            if got_dtype not in (dtype, FP8_DTYPE) and not is_float:
                raise WeightsError(
                    f"{located[name]}: tensor {name!r} has dtype {got_dtype}, expected {dtype}"
                )
    ignored = layout.ignored_prefixes
    if model.config.tie_word_embeddings:
        ignored = (*ignored, "lm_head.")  # a tied head some savers still write out
    read_with_weights = fp8.consumed if fp8 is not None else frozenset()
    unexpected = sorted(
        n
        for n in set(located) - set(used) - read_with_weights
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

    # a norm's scale is weight + offset: centre each weight so that the scale is near 1
    offsets = {
        f"{module_name}.weight": float(module.offset)
        for module_name, module in model.named_modules()
        if isinstance(getattr(module, "offset", None), float)
    }
    for name, param in model.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        if name.endswith("embed_tokens.weight"):
            value = normal(param.shape, 1.0)
        elif name.endswith("lm_head.weight"):
            value = normal(param.shape, 3.0 / math.sqrt(param.shape[1]))
        elif "norm" in name:
            value = normal(param.shape, 0.1, 1.0 - offsets.get(name, 0.0))
        elif leaf == "A_log":
            value = torch.rand(param.shape, generator=generator) * 2.0 - 1.0
        elif leaf == "dt_bias":
            value = normal(param.shape, 0.5)
        elif leaf == "weight" and param.dim() >= 2:
            fan_in = param.shape[1] * (param.shape[2] if param.dim() == 3 else 1)
            value = normal(param.shape, 1.0 / math.sqrt(fan_in))
        else:
            value = normal(param.shape, 0.1)
        param.copy_(value.to(param.dtype))
    return model


def random_model(config: ModelConfig, seed: int = 0) -> HybridModel:
    """A model of ``config`` with random weights (tests, benchmarks and the tiny trainer)."""
    return randomize_(HybridModel(config), seed).to(_DTYPES[config.torch_dtype]).eval()


def write_random_checkpoint(path: str | Path, config: ModelConfig, seed: int = 0) -> Path:
    """config.json and model.safetensors of a random ``config`` model in its family's layout."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    family = family_for_model_type(config.model_type, "<config>")
    raw = family.config_json(config)
    model = random_model(config, seed)
    tensors = checkpoint_tensors(model, family.layout(model, frozenset()))
    parsed = family.parse_config(raw, str(path / CONFIG_FILE), frozenset(tensors))
    if parsed != config:
        changed = next(
            f for f in config.__dataclass_fields__ if getattr(parsed, f) != getattr(config, f)
        )
        raise ValueError(
            f"family {family.name!r} cannot state field {changed!r} = "
            f"{getattr(config, changed)!r} in config.json (reads back "
            f"{getattr(parsed, changed)!r})"
        )
    (path / CONFIG_FILE).write_text(json.dumps(raw, indent=2) + "\n")
    save_file(tensors, str(path / WEIGHTS_FILE))
    return path


@torch.no_grad()
def checkpoint_tensors(model: HybridModel, layout: CheckpointLayout) -> dict[str, torch.Tensor]:
    """The checkpoint tensors ``layout`` reads ``model``'s parameters from (the inverse of
    loading); a tensor element no parameter reads is an error."""
    params = dict(model.named_parameters())
    flat: dict[str, torch.Tensor] = {}
    written: dict[str, torch.Tensor] = {}
    for name, source in layout.sources.items():
        param = params[name].detach()
        if source.combine is None:
            flat[source.names[0]] = param.reshape(-1).clone()
            written[source.names[0]] = torch.ones(param.numel(), dtype=torch.bool)
            continue
        offsets, indices = [0], []
        for shape in source.shapes:
            numel = math.prod(shape)
            indices.append(torch.arange(offsets[-1], offsets[-1] + numel).view(shape))
            offsets.append(offsets[-1] + numel)
        picked = source.build(indices).reshape(-1)
        values = param.reshape(-1)
        for i, (tensor_name, shape) in enumerate(zip(source.names, source.shapes, strict=True)):
            numel = math.prod(shape)
            if tensor_name not in flat:
                flat[tensor_name] = torch.zeros(numel, dtype=param.dtype)
                written[tensor_name] = torch.zeros(numel, dtype=torch.bool)
            mine = (picked >= offsets[i]) & (picked < offsets[i + 1])
            flat[tensor_name][picked[mine] - offsets[i]] = values[mine]
            written[tensor_name][picked[mine] - offsets[i]] = True
    shapes = {
        n: shape
        for source in layout.sources.values()
        for n, shape in zip(source.names, source.shapes, strict=True)
    }
    for tensor_name, is_written in written.items():
        if not bool(is_written.all()):
            raise ValueError(f"tensor {tensor_name!r}: some elements are read by no parameter")
    return {n: t.view(shapes[n]).contiguous() for n, t in flat.items()}
