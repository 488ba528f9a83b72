"""Safetensors checkpoints in the Hugging Face layout.

Tensor names follow the Hugging Face convention: ``model.`` + the module path for the
trunk (``model.layers.N.self_attn.q_proj.weight``, ``model.layers.N.linear_attn.A_log``,
``model.layers.N.mlp.experts.E.gate_proj.weight``), ``lm_head.weight`` and ``mtp.*``. Loading
checks every expected tensor for presence, shape and dtype before copying any, and names
the first mismatch, so a wrong checkpoint is rejected whole.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ignition.model.config import Qwen38Config
from ignition.model.model import Qwen38Model

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_UNPREFIXED = ("lm_head.", "mtp.")


class WeightsError(ValueError):
    """A checkpoint whose tensors do not match what its config.json describes."""


def checkpoint_name(module_name: str) -> str:
    """Internal parameter name -> Hugging Face tensor name."""
    return module_name if module_name.startswith(_UNPREFIXED) else f"model.{module_name}"


def expected_tensors(model: Qwen38Model) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """HF name -> (shape, dtype) of every tensor a checkpoint must hold, in module order."""
    dtype = _DTYPES[model.config.torch_dtype]
    # named_parameters drops the tied lm_head (it is the embedding), as HF checkpoints do.
    return {
        checkpoint_name(name): (tuple(param.shape), dtype)
        for name, param in model.named_parameters()
    }


def _weight_files(path: Path) -> list[Path]:
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise WeightsError(f"{path}: no *.safetensors file")
    return files


def load_model(path: str | Path, device: torch.device | str = "cpu") -> Qwen38Model:
    """Build the model described by ``path``/config.json and load its weights (checked)."""
    path = Path(path)
    config = Qwen38Config.from_json(path / CONFIG_FILE)
    with torch.device("meta"):
        model = Qwen38Model(config)
    model = model.to_empty(device=device).to(_DTYPES[config.torch_dtype])
    model.tie_weights()
    load_weights(model, path)
    return model.eval()


def load_weights(model: Qwen38Model, path: str | Path) -> None:
    """Check every expected tensor (presence, shape, dtype) first, then copy them in."""
    path = Path(path)
    located: dict[str, Path] = {}
    for file in _weight_files(path):
        with safe_open(file, framework="pt") as handle:
            for name in handle.keys():  # noqa: SIM118 (safe_open is not a mapping)
                located.setdefault(name, file)
    expected = expected_tensors(model)
    for name, (shape, dtype) in expected.items():
        if name not in located:
            raise WeightsError(f"{path}: missing tensor {name!r} (expected {list(shape)} {dtype})")
        with safe_open(located[name], framework="pt") as handle:
            piece = handle.get_slice(name)
            got_shape = tuple(piece.get_shape())
            got_dtype = _safetensors_dtype(piece.get_dtype())
        if got_shape != shape:
            raise WeightsError(
                f"{located[name]}: tensor {name!r} has shape {list(got_shape)}, "
                f"expected {list(shape)}"
            )
        if got_dtype != dtype:
            raise WeightsError(
                f"{located[name]}: tensor {name!r} has dtype {got_dtype}, expected {dtype}"
            )
    unexpected = sorted(set(located) - set(expected))
    if unexpected:
        raise WeightsError(
            f"{path}: unexpected tensor {unexpected[0]!r} ({len(unexpected)} in all)"
        )
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, param in params.items():
            hf_name = checkpoint_name(name)
            with safe_open(located[hf_name], framework="pt", device=str(param.device)) as handle:
                param.copy_(handle.get_tensor(hf_name))


def _safetensors_dtype(name: str) -> torch.dtype | str:
    return {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}.get(name, name)


@torch.no_grad()
def randomize_(model: Qwen38Model, seed: int) -> Qwen38Model:
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


def random_model(config: Qwen38Config, seed: int = 0) -> Qwen38Model:
    return randomize_(Qwen38Model(config), seed).to(_DTYPES[config.torch_dtype]).eval()


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
