"""The activations a config.json's ``hidden_act`` may name, by their transformers names
(kernels and model layers share this one table).

transformers' families apply ``ACT2FN[config.hidden_act]`` in the MLPs (every expert and the
shared expert) and, in the Qwen3.5 lineage, after the GDN short convolution; the names here
are those of ``ACT2FN`` that published configs use, each computed as transformers computes
it. Any other name is refused in one line naming the file and the key
(``families.hf_text.TextReader.activation``), never replaced by SiLU.
"""

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
