"""One-row bf16 projections on CPU through ``torch.mv``.

:class:`RowLinear` is ``nn.Linear`` with one case, a bias-free bf16 projection of one row on
a CPU tensor, sent to ``torch.mv`` (faster there; docs/cpu_profile.md). The condition reads
only shapes, dtype and device; outputs are held to bf16 rounding (tests/model/test_row_products.py).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class RowLinear(nn.Linear):
    """``nn.Linear`` whose one-row bf16 CPU products go through ``torch.mv``."""

    def forward(self, x: Tensor) -> Tensor:
        if is_one_bf16_cpu_row(x) and self.bias is None and self.weight.dtype == x.dtype:
            return torch.mv(self.weight, x.reshape(-1)).reshape(*x.shape[:-1], -1)
        return super().forward(x)


def is_one_bf16_cpu_row(x: Tensor) -> bool:
    return x.dtype == torch.bfloat16 and x.device.type == "cpu" and x.numel() == x.shape[-1] > 0


def use_row_products(model: nn.Module) -> int:
    """Make every plain ``nn.Linear`` a :class:`RowLinear` in place; returns how many."""
    count = 0
    for module in model.modules():
        if type(module) is nn.Linear:
            module.__class__ = RowLinear
            count += 1
    return count
