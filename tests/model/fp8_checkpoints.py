"""Block-FP8 checkpoints in the published layout, made from a float checkpoint by the tests.

:func:`quantize_to_fp8` rewrites a saved checkpoint as the ``-FP8`` releases are laid out:
every projection weight (not the embeddings, head, norms, router and shared-expert gates,
GDN ``in_proj_a`` / ``in_proj_b``, convolution or vision tower, which the releases list in
``modules_to_not_convert``) becomes float8_e4m3fn with a ``weight_scale_inv`` block grid
(fused experts: ``gate_up_proj_scale_inv``), and config.json gains the
``quantization_config``. :func:`write_dequantized` writes the same checkpoint with every FP8
tensor expanded by :func:`reference_dequantize`, an independent block-by-block reference, so
a test can compare a load of one with a load of the other (or with transformers).
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from tests.model.hf_checkpoints import rewrite_tensors

FP8_MAX = torch.finfo(torch.float8_e4m3fn).max
_QUANTISED = re.compile(r".*(_proj(_[a-z]+)?\.weight|\.fc\.weight|\.experts\.(gate_up|down)_proj)$")
_KEPT = re.compile(r".*(visual\.|in_proj_a\.|in_proj_b\.|in_proj_ba\.|shared_expert_gate\.)")


def is_quantised(name: str, tensor: torch.Tensor) -> bool:
    return tensor.dim() in (2, 3) and bool(_QUANTISED.match(name)) and not _KEPT.match(name)


def _blocks(tensor: torch.Tensor, block: tuple[int, int]) -> torch.Tensor:
    """[..., R, C] zero-padded to whole blocks, as [..., R/bo, bo, C/bi, bi]."""
    rows, cols = tensor.shape[-2:]
    grid = (math.ceil(rows / block[0]), math.ceil(cols / block[1]))
    padded = F.pad(tensor, (0, grid[1] * block[1] - cols, 0, grid[0] * block[0] - rows))
    return padded.unflatten(-1, (grid[1], block[1])).unflatten(-3, (grid[0], block[0]))


def quantize_block(
    weight: torch.Tensor, block: tuple[int, int], scale_dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """(float8_e4m3fn weight, its [..., ceil(R/bo), ceil(C/bi)] block multipliers)."""
    rows, cols = weight.shape[-2:]
    blocks = _blocks(weight.float(), block)
    scale = (blocks.abs().amax(dim=(-3, -1)) / FP8_MAX).clamp(min=1e-12).to(scale_dtype)
    quantised = (blocks / scale.float()[..., :, None, :, None]).clamp(-FP8_MAX, FP8_MAX)
    quantised = quantised.flatten(-2).flatten(-3, -2)[..., :rows, :cols]
    return quantised.to(torch.float8_e4m3fn).contiguous(), scale.contiguous()


def reference_dequantize(
    weight: torch.Tensor, scale: torch.Tensor, block: tuple[int, int] | None, dtype: torch.dtype
) -> torch.Tensor:
    """Block by block: each scale multiplies its (possibly cut short) block, in float32."""
    values = weight.float()
    if scale.numel() == 1:
        return (values * scale.float().reshape(())).to(dtype)
    rows, cols = values.shape[-2:]
    out = _blocks(values, block) * scale.float()[..., :, None, :, None]
    return out.flatten(-2).flatten(-3, -2)[..., :rows, :cols].to(dtype)


def quantize_to_fp8(
    path: Path, block: tuple[int, int] = (128, 128), scale_dtype: torch.dtype = torch.float32
) -> list[str]:
    """Rewrite the checkpoint at ``path`` as a block-FP8 release; returns the FP8 tensors."""
    quantised: list[str] = []
    kept: set[str] = set()

    def edit(tensors: dict[str, torch.Tensor]) -> None:
        for name in sorted(tensors):
            tensors[name] = tensors[name].contiguous()  # some saves hold strided views
            if not is_quantised(name, tensors[name]):
                if name.endswith(".weight") and tensors[name].dim() >= 2:
                    kept.add(name[: -len(".weight")])
                continue
            weight, scale = quantize_block(tensors[name], block, scale_dtype)
            tensors[name] = weight
            tensors[name + "_scale_inv"] = scale  # X.weight_scale_inv, experts.X_scale_inv
            quantised.append(name)

    rewrite_tensors(path, edit)
    config = json.loads((path / "config.json").read_text())
    config["quantization_config"] = {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "quant_method": "fp8",
        "weight_block_size": list(block),
        "modules_to_not_convert": sorted(kept),
    }
    (path / "config.json").write_text(json.dumps(config, indent=2))
    return quantised


def write_dequantized(fp8_path: Path, out: Path, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """A copy of ``fp8_path`` with every FP8 tensor expanded (no quantization_config);
    returns the expanded tensors by name."""
    shutil.copytree(fp8_path, out)
    config = json.loads((out / "config.json").read_text())
    block = tuple(config.pop("quantization_config")["weight_block_size"])
    (out / "config.json").write_text(json.dumps(config, indent=2))
    expanded: dict[str, torch.Tensor] = {}

    def edit(tensors: dict[str, torch.Tensor]) -> None:
        for name in [n for n in sorted(tensors) if tensors[n].dtype == torch.float8_e4m3fn]:
            scale = tensors.pop(name + "_scale_inv")  # X.weight_scale_inv, experts.X_scale_inv
            tensors[name] = reference_dequantize(tensors[name], scale, block, dtype).contiguous()
            expanded[name] = tensors[name]

    rewrite_tensors(out, edit)
    return expanded


def edit_file(path: Path, name: str, edit) -> None:
    """Apply ``edit`` to the tensors of the one safetensors file holding ``name``."""
    for file in sorted(path.glob("*.safetensors")):
        tensors = load_file(file)
        if name in tensors:
            edit(tensors)
            save_file(tensors, str(file), metadata={"format": "pt"})
            return
    raise KeyError(name)
