"""One-row bf16 projections on CPU through ``torch.mv`` (issue 30).

On CPU, PyTorch's bf16 ``linear`` of a single input row goes through a matrix-matrix path
that runs no faster than the fp32 product reading twice the bytes (a 512 -> 2048
projection: 134-147 us either way on AVX512-BF16/AMX), while ``torch.mv`` of the same
weight takes 83-95 us, and the 32,000-row vocabulary projection 1.5 ms instead of 2.3 ms
(``benchmarks/cpu_matmul_dtypes.py``). A decode step at batch 1 is one row through every
projection, so without this a bf16 model decodes no faster than fp32.

:class:`RowLinear` is ``nn.Linear`` with that one case sent to ``torch.mv``: a bias-free
bf16 projection of one row on a CPU tensor. The condition reads shapes, dtype and device
only, which a prepared program fixes, so it never branches on data. PyTorch does not
promise the same summation order as ``linear``'s, so its outputs are held to bf16 rounding
(tests/model/test_row_products.py; on the development machine they were bitwise equal);
every other case is ``nn.Linear.forward`` unchanged.
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
    """Make every plain ``nn.Linear`` of ``model`` a :class:`RowLinear`, in place (the same
    parameters, so tied weights stay tied); returns how many. For bf16 models on CPU."""
    count = 0
    for module in model.modules():
        if type(module) is nn.Linear:
            module.__class__ = RowLinear
            count += 1
    return count
