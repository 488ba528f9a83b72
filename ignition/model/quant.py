"""Quantised checkpoints: block-FP8 is dequantised at load, every other scheme is refused.

The one accepted layout (config.json ``quant_method: "fp8"``, ``fmt: "e4m3"``): an
``F8_E4M3`` ``<m>.weight`` beside ``<m>.weight_scale_inv``, the multiplier of each
``weight_block_size`` block (``W = W8 * s``, ragged last blocks), or a one-value
``weight_scale`` per tensor (shared by a split n-gram table's shards). Other schemes are
refused in one line naming the file and the ``quant_method``. Sources: docs/model.md.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ignition.model.checkpoint_files import WeightsError, read_headers, read_tensor
from ignition.model.config import ConfigError

FP8_METHOD = "fp8"
FP8_DTYPE = "F8_E4M3"  # the safetensors name of torch.float8_e4m3fn
SCALE_DTYPES = ("F32", "BF16", "F16")  # safetensors names of the float scale dtypes
# Side files other quantisers write: their presence means the weights are not plain floats.
_SIDE_FILES = ("hf_quant_config.json", "quantize_config.json", "quant_config.json")
_SHARD = re.compile(r"(.+)\.shard_\d+")
_ACCEPTED = "only unquantised and block-FP8 ('fp8', dequantised at load) checkpoints load"


class UnsupportedQuantization(ConfigError):
    """A checkpoint quantised in a scheme Ignition does not dequantise."""


@dataclass(frozen=True)
class Fp8Scheme:
    """A checkpoint's FP8 settings (from config.json's ``quantization_config``)."""

    block: tuple[int, int] | None  # weight_block_size [rows, columns]; None: per tensor
    activation_scheme: str = "dynamic"
    modules_to_not_convert: tuple[str, ...] = ()


def read_quantization(raw: Mapping[str, Any], folder: Path) -> Fp8Scheme | None:
    """The FP8 scheme of a checkpoint folder, None when unquantised; refuses any other."""
    source = str(folder / "config.json")
    block = raw.get("quantization_config")
    text = raw.get("text_config")
    if block is None and isinstance(text, Mapping):
        block = text.get("quantization_config")
    if block is None:
        for name in _SIDE_FILES:
            if (folder / name).exists():
                method = _side_file_method(folder / name)
                detail = f"quantised checkpoint ({method}): not supported; {_ACCEPTED}"
                raise UnsupportedQuantization(str(folder / name), detail)
        return None
    if not isinstance(block, Mapping):
        raise ConfigError(source, f"key 'quantization_config' = {block!r}: expected an object")
    method = block.get("quant_method")
    if method != FP8_METHOD:
        algo = block.get("quant_algo") or block.get("format")
        detail = f" ({algo})" if isinstance(algo, str) else ""
        raise UnsupportedQuantization(
            source,
            f"key 'quantization_config.quant_method' = {method!r}{detail}: not supported; "
            f"{_ACCEPTED}",
        )
    _expect(block, "fmt", ("e4m3",), source)
    _expect(block, "scale_fmt", ("float",), source)
    _expect(block, "expert_dtype", ("fp8",), source)
    activation = _expect(block, "activation_scheme", ("dynamic", "static"), source) or "dynamic"
    return Fp8Scheme(
        block=_block_size(block.get("weight_block_size"), source),
        activation_scheme=activation,
        modules_to_not_convert=_names(block, source),
    )


def _expect(block: Mapping[str, Any], key: str, allowed: tuple[str, ...], source: str) -> Any:
    value = block.get(key)
    if value is not None and value not in allowed:
        raise UnsupportedQuantization(
            source,
            f"key 'quantization_config.{key}' = {value!r}: not supported "
            f"(expected {' or '.join(map(repr, allowed))})",
        )
    return value


def _block_size(value: Any, source: str) -> tuple[int, int] | None:
    if value is None:
        return None
    if (
        not isinstance(value, list | tuple)
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
    ):
        raise ConfigError(
            source,
            f"key 'quantization_config.weight_block_size' = {value!r}: expected two positive ints",
        )
    return (value[0], value[1])


def _names(block: Mapping[str, Any], source: str) -> tuple[str, ...]:
    key = "modules_to_not_convert" if "modules_to_not_convert" in block else "ignored_layers"
    value = block.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(source, f"key 'quantization_config.{key}' = {value!r}: expected names")
    return tuple(value)


def _side_file_method(path: Path) -> str:
    """'quant_method X' / 'quant_algo X' from another quantiser's side file, for the refusal."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return "unreadable"
    if isinstance(data, Mapping) and isinstance(data.get("quantization"), Mapping):
        data = data["quantization"]  # ModelOpt's hf_quant_config.json
    if not isinstance(data, Mapping):
        return "unknown"
    for key in ("quant_method", "quant_algo", "format"):
        if isinstance(data.get(key), str):
            return f"{key} {data[key]!r}"
    return "unknown"


def scale_names(name: str) -> tuple[str, ...]:
    """Where FP8 tensor ``name``'s scale may be stored, most specific first."""
    if not name.endswith(".weight"):  # fused experts: gate_up_proj -> gate_up_proj_scale_inv
        return (f"{name}_scale_inv", f"{name}_scale")
    base = name[: -len(".weight")]
    names = [f"{base}.weight_scale_inv", f"{base}.weight_scale"]
    if shard := _SHARD.fullmatch(base):
        names.append(f"{shard.group(1)}.weight_scale")
    return tuple(names)


def activation_scale_names(name: str) -> tuple[str, ...]:
    """Static activation scales saved beside an FP8 weight; dequantised serving ignores them."""
    base = name[: -len(".weight")] if name.endswith(".weight") else name
    return (f"{base}.input_scale", f"{base}.activation_scale")


def block_scale_shape(shape: tuple[int, ...], block: tuple[int, int]) -> tuple[int, ...]:
    """The scale grid of a [..., rows, columns] weight in blocks of ``block`` (ragged edges)."""
    *lead, rows, cols = shape
    return (*lead, math.ceil(rows / block[0]), math.ceil(cols / block[1]))


def dequantize(
    weight: torch.Tensor,
    scale: torch.Tensor,
    block: tuple[int, int] | None,
    dtype: torch.dtype,
) -> torch.Tensor:
    """``weight`` (float8_e4m3fn, [..., rows, columns]) times its scale, as ``dtype``: a
    one-value ``scale`` or the block grid (:func:`block_scale_shape`); float32, rounded once."""
    if scale.numel() == 1:
        return dequantize_rows(weight, scale, dtype)
    if block is None or tuple(scale.shape) != block_scale_shape(tuple(weight.shape), block):
        raise ValueError(
            f"scale {list(scale.shape)} is not the {block} block grid of {list(weight.shape)}"
        )
    rows, cols = weight.shape[-2:]
    per_element = (
        scale.to(torch.float32)
        .repeat_interleave(block[0], dim=-2)[..., :rows, :]
        .repeat_interleave(block[1], dim=-1)[..., :cols]
    )
    return (weight.to(torch.float32) * per_element).to(dtype)


def dequantize_rows(rows: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """FP8 rows times the table's one scale, as ``dtype`` (n-gram table rows)."""
    if scale.numel() != 1:
        raise ValueError(f"a per-tensor scale has one value, got shape {list(scale.shape)}")
    return (rows.to(torch.float32) * scale.to(torch.float32).reshape(())).to(dtype)


@dataclass(frozen=True)
class Fp8Plan:
    """Which checkpoint tensors are FP8 and the scale each is multiplied by as it is read."""

    scales: dict[str, str]  # FP8 tensor -> its scale tensor
    block: tuple[int, int] | None
    consumed: frozenset[str]  # scales (and static activation scales) read with their weights
    _scale_cache: dict[str, torch.Tensor] = field(default_factory=dict, compare=False, repr=False)

    def dequantize(
        self, name: str, tensor: torch.Tensor, located: Mapping[str, Path], dtype: torch.dtype
    ) -> torch.Tensor:
        """``tensor`` (checkpoint tensor ``name``) in ``dtype`` if it is FP8, else unchanged."""
        if name not in self.scales:
            return tensor
        scale_name = self.scales[name]
        if scale_name not in self._scale_cache:  # small; a split table's shards share one
            self._scale_cache[scale_name] = read_tensor(located, scale_name)
        return dequantize(tensor, self._scale_cache[scale_name], self.block, dtype)


def plan_fp8(
    config_path: Path, located: dict[str, Path], scheme: Fp8Scheme | None
) -> Fp8Plan | None:
    """Pair every F8_E4M3 tensor with its checked scale (headers only); None without FP8."""
    headers = read_headers(located)
    fp8_names = sorted(n for n, (dtype, _) in headers.items() if dtype == FP8_DTYPE)
    for name, (dtype, _) in sorted(headers.items()):
        if dtype.startswith("F8_") and dtype != FP8_DTYPE:
            raise WeightsError(
                f"{located[name]}: tensor {name!r} has dtype {dtype}; only {FP8_DTYPE} loads"
            )
    if not fp8_names:
        return None
    if scheme is None:
        raise WeightsError(
            f"{located[fp8_names[0]]}: tensor {fp8_names[0]!r} is {FP8_DTYPE} but "
            f"{config_path} has no quantization_config"
        )
    scales: dict[str, str] = {}
    consumed: set[str] = set()
    for name in fp8_names:
        shape = headers[name][1]
        candidates = scale_names(name)
        scale = next((c for c in candidates if c in headers), None)
        if scale is None:
            raise WeightsError(
                f"{located[name]}: FP8 tensor {name!r} has no scale tensor {candidates[0]!r}"
            )
        _check_scale(located[scale], scale, headers[scale], name, shape, scheme.block)
        scales[name] = scale
        consumed.add(scale)
        consumed.update(n for n in activation_scale_names(name) if n in headers)
    return Fp8Plan(scales, scheme.block, frozenset(consumed))


def _check_scale(
    file: Path,
    scale: str,
    header: tuple[str, tuple[int, ...]],
    name: str,
    shape: tuple[int, ...],
    block: tuple[int, int] | None,
) -> None:
    """A block scale is the weight's block grid; any other is one value (f32/bf16/f16)."""
    dtype, got = header
    is_block = scale.endswith("_scale_inv") and block is not None and len(shape) >= 2
    if is_block:
        want = block_scale_shape(shape, block)
        fits, expected = got == want, f"{list(want)} ({list(block)} blocks of {list(shape)})"
    else:
        fits, expected = math.prod(got) == 1, f"one value (per-tensor scale of {list(shape)})"
    if not fits:
        raise WeightsError(
            f"{file}: scale tensor {scale!r} of {name!r} has shape {list(got)}, expected {expected}"
        )
    if dtype not in SCALE_DTYPES:
        raise WeightsError(
            f"{file}: scale tensor {scale!r} has dtype {dtype}, expected F32, BF16 or F16"
        )
