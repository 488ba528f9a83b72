"""The activations ``hidden_act`` may name, computed as transformers' ``ACT2FN`` does."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor


def _gelu_tanh(x: Tensor) -> Tensor:
    return F.gelu(x, approximate="tanh")


def _gelu_new(x: Tensor) -> Tensor:
    """transformers' ``NewGELUActivation`` (the tanh approximation, spelled out)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


def _quick_gelu(x: Tensor) -> Tensor:
    return x * torch.sigmoid(1.702 * x)


ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "silu": F.silu,
    "swish": F.silu,
    "gelu": F.gelu,
    "gelu_pytorch_tanh": _gelu_tanh,
    "gelu_new": _gelu_new,
    "quick_gelu": _quick_gelu,
    "relu": F.relu,
}


def activation(name: str) -> Callable[[Tensor], Tensor]:
    """The function ``hidden_act`` = ``name`` applies (KeyError names the supported ones)."""
    if name not in ACTIVATIONS:
        raise KeyError(f"activation {name!r}: expected one of {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name]
