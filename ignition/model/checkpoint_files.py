"""The safetensors files of a checkpoint folder: where each tensor is, its header, its bytes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors import safe_open

INDEX_FILE = "model.safetensors.index.json"


class WeightsError(ValueError):
    """A checkpoint whose tensors do not match what its config.json describes."""


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


def read_headers(located: dict[str, Path]) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Tensor name -> (safetensors dtype name, shape), from the file headers only."""
    headers: dict[str, tuple[str, tuple[int, ...]]] = {}
    for file in sorted(set(located.values())):
        with safe_open(file, framework="pt") as handle:
            for name in handle.keys():  # noqa: SIM118 (safe_open is not a mapping)
                if located.get(name) == file:
                    piece = handle.get_slice(name)
                    headers[name] = (piece.get_dtype(), tuple(piece.get_shape()))
    return headers


def read_tensor(located: Mapping[str, Path], name: str) -> torch.Tensor:
    with safe_open(located[name], framework="pt") as handle:
        return handle.get_tensor(name)
