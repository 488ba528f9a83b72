"""RMSNorm and the gated RMSNorm that closes a Gated DeltaNet block."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def rms_norm(x: Tensor, weight: Tensor, eps: float, offset: float = 0.0) -> Tensor:
    """Normalise in fp32; ``offset`` 1.0 is the zero-centred form (scale ``1 + weight``)."""
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return (x32 * (weight.float() + offset)).to(x.dtype)


def l2_normalize(x: Tensor, eps: float = 1e-6) -> Tensor:
    """x / sqrt(sum x^2 + eps) over the last dim in fp32 (fla's form, eps inside the root)."""
    x32 = x.float()
    return x32 * torch.rsqrt(x32.pow(2).sum(-1, keepdim=True) + eps)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float, offset: float = 0.0) -> None:
        super().__init__()
        self.eps = eps
        self.offset = offset
        # Initialised to the identity scale whichever form the weight takes.
        self.weight = nn.Parameter(torch.full((dim,), 1.0 - offset))

    def forward(self, x: Tensor) -> Tensor:
        return rms_norm(x, self.weight, self.eps, self.offset)


class GatedRMSNorm(nn.Module):
    """norm(o) * act(z): a GDN head's output gate (SiLU or sigmoid)."""

    def __init__(self, dim: int, eps: float, activation: str = "silu") -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.activation = F.silu if activation == "silu" else torch.sigmoid

    def forward(self, x: Tensor, gate: Tensor) -> Tensor:
        normed = rms_norm(x, self.weight, self.eps)
        return (normed.float() * self.activation(gate.float())).to(x.dtype)
