"""Gated-residual hyper-connections (Qwen3.8-Flash-Next): ``hc_streams`` residual streams
(formulas: docs/model.md)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ignition.model.layers.norm import rms_norm


class GroupedRMSNorm(nn.Module):
    """RMSNorm of each stream of [..., S, hidden] separately, one weight [S * hidden]."""

    def __init__(self, num_streams: int, hidden: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.num_streams, self.hidden = num_streams, hidden
        self.weight = nn.Parameter(torch.zeros(num_streams * hidden))  # zero-centred: 1 + w

    def forward(self, streams: Tensor) -> Tensor:
        """streams [..., S, hidden] -> normed [..., S, hidden] (scale 1 + weight)."""
        weight = self.weight.view(self.num_streams, self.hidden)
        return rms_norm(streams, weight, self.eps, offset=1.0)


class GatedHyperConnection(nn.Module):
    """One block's read (mixed input) and write (per-stream injection)."""

    def __init__(self, num_streams: int, hidden: int, lowrank: int, eps: float, writes: bool):
        super().__init__()
        width = num_streams * hidden
        self.num_streams = num_streams
        self.hc_norm = GroupedRMSNorm(num_streams, hidden, eps)
        self.input_mix_weight_down = nn.Linear(width, lowrank, bias=False)
        self.input_mix_weight_up = nn.Linear(lowrank, width, bias=False)
        self.block_inject_weight = nn.Linear(width, num_streams, bias=False) if writes else None

    def read(self, streams: Tensor) -> tuple[Tensor, Tensor | None]:
        """streams [T, S, hidden] -> (block input [T, hidden], injection weights [T, S])."""
        normed = self.hc_norm(streams)
        flat = normed.flatten(-2)  # [T, S * hidden]
        low = F.silu(self.input_mix_weight_down(flat) / self.num_streams)
        mix = torch.sigmoid(self.input_mix_weight_up(low)).view_as(normed)
        block_input = (mix * normed).mean(dim=-2)
        if self.block_inject_weight is None:
            return block_input, None
        inject = 2 * torch.sigmoid(self.block_inject_weight(flat) / self.num_streams)
        return block_input, inject

    def write(self, streams: Tensor, block_out: Tensor, inject: Tensor | None) -> Tensor:
        """streams [T, S, hidden] + inject [T, S, 1] x block_out [T, 1, hidden]."""
        assert inject is not None
        return streams + inject[..., None] * block_out[:, None, :]
