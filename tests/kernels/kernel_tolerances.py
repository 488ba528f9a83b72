"""Named tolerances of the Triton kernels against their references, per activation dtype.

fp32 bounds cover reordered fp32 sums (and tf32x3 matmuls on a GPU); fp16 bounds cover one
rounding of the output to fp16 (relative 2^-11) plus fp16 operands inside tl.dot.
"""

from __future__ import annotations

import torch

INTERPRETER_DTYPES = (torch.float32, torch.float16)  # the interpreter has no bf16

ATTENTION = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
    torch.float16: {"atol": 2e-3, "rtol": 2e-3},
}
CONV = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
    torch.float16: {"atol": 4e-3, "rtol": 2e-3},
}
GDN_OUTPUT = {
    torch.float32: {"atol": 1e-4, "rtol": 1e-4},
    torch.float16: {"atol": 2e-3, "rtol": 2e-3},
}
GDN_STATE = {"atol": 1e-4, "rtol": 1e-4}  # states are fp32 whatever the activation dtype
CONFIDENCE = {"atol": 1e-7, "rtol": 1e-6}  # sequential vs double-accumulated products
EXACT = {"atol": 0.0, "rtol": 0.0}


def nan_like(tensor: torch.Tensor, *shape: int, dtype: torch.dtype | None = None) -> torch.Tensor:
    """An output buffer filled with NaN (or -7 for integers) so unwritten elements fail."""
    dtype = dtype or tensor.dtype
    size = shape or tensor.shape
    fill = float("nan") if dtype.is_floating_point else -7
    return torch.full(size, fill, dtype=dtype, device=tensor.device)
