"""Partial rotary position embedding: only the first rotary_dim channels of a head rotate."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ignition.model.config import RopeScaling


class PartialRotary:
    """Rotates the leading ``rotary_dim`` channels of each head (half-split convention)."""

    def __init__(
        self,
        head_dim: int,
        rotary_dim: int,
        theta: float,
        scaling: RopeScaling | None = None,
        mrope_section: tuple[int, int, int] | None = None,
    ) -> None:
        self.head_dim = head_dim
        self.rotary_dim = rotary_dim
        self.axis = _interleaved_axes(rotary_dim // 2, mrope_section)
        # Explicit CPU: a meta-device model still needs real frequencies.
        steps = torch.arange(0, rotary_dim, 2, dtype=torch.float64, device="cpu")
        exponents = steps / max(rotary_dim, 1)
        inv_freq = 1.0 / (theta**exponents)
        if scaling is not None:
            inv_freq = _llama3_scaled(inv_freq, scaling)
        self.inv_freq = inv_freq.float()  # [rotary_dim / 2]

    def __call__(self, x: Tensor, positions: Tensor) -> Tensor:
        """x [tokens, heads, head_dim]; positions [tokens] int, or [3, tokens] multimodal
        (temporal, height, width) positions, each frequency pair reading its own axis."""
        if self.rotary_dim == 0:
            return x
        inv_freq = self.inv_freq.to(x.device)
        if positions.dim() == 2:
            axis = self.axis.to(x.device)
            per_pair = positions.float().index_select(0, axis)  # [rotary_dim / 2, tokens]
            angles = per_pair.t() * inv_freq[None, :]
        else:
            angles = positions.float()[:, None] * inv_freq[None, :]  # [tokens, rotary_dim / 2]
        cos = angles.cos()[:, None, :]
        sin = angles.sin()[:, None, :]
        half = self.rotary_dim // 2
        rot = x[..., : self.rotary_dim].float()
        first, second = rot[..., :half], rot[..., half:]
        rotated = torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1)
        return torch.cat([rotated.to(x.dtype), x[..., self.rotary_dim :]], dim=-1)


def _interleaved_axes(pairs: int, section: tuple[int, int, int] | None) -> Tensor:
    """Position axis of each frequency pair (interleaved t/h/w within their sections)."""
    axis = torch.zeros(pairs, dtype=torch.long, device="cpu")  # not a weight: never meta
    if section is None:
        return axis
    for dim in (1, 2):
        for j in range(dim, min(3 * section[dim], pairs), 3):
            axis[j] = dim
    return axis


def _llama3_scaled(inv_freq: Tensor, s: RopeScaling) -> Tensor:
    """Llama 3's long-context frequencies: long wavelengths divided by the factor, a linear
    band between."""
    wavelen = 2 * math.pi / inv_freq
    old_len = s.original_max_position_embeddings
    low_wavelen, high_wavelen = old_len / s.low_freq_factor, old_len / s.high_freq_factor
    smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor)
    blended = (1 - smooth) * inv_freq / s.factor + smooth * inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / s.factor, inv_freq)
    is_band = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(is_band, blended, scaled)
