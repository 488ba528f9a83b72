"""Triton causal depthwise conv1d + activation, reading history = window then new inputs."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ignition.kernels.causal_conv1d import reference

BLOCK_POSITIONS = 16
BLOCK_CHANNELS = 64
# kernels.activations' names as the kernels' ACTIVATION constant
ACTIVATION_CODES = {
    "silu": 0,
    "swish": 0,
    "gelu": 1,
    "gelu_pytorch_tanh": 2,
    "gelu_new": 2,
    "quick_gelu": 3,
    "relu": 4,
}


def activation_code(name: str) -> int:
    if name not in ACTIVATION_CODES:
        raise ValueError(f"activation {name!r}: expected one of {', '.join(ACTIVATION_CODES)}")
    return ACTIVATION_CODES[name]


@triton.jit
def _activate(y, ACTIVATION: tl.constexpr):
    """ACTIVATION_CODES' activation of fp32 ``y``."""
    if ACTIVATION == 0:
        out = y * tl.sigmoid(y)
    elif ACTIVATION == 1:
        out = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))
    elif ACTIVATION == 2:
        inner = 0.7978845608028654 * (y + 0.044715 * y * y * y)
        out = y * tl.sigmoid(2.0 * inner)  # 0.5 (1 + tanh(u)) = sigmoid(2u)
    elif ACTIVATION == 3:
        out = y * tl.sigmoid(1.702 * y)
    else:
        out = tl.maximum(y, 0.0)
    return out


@triton.jit
def _load_history(
    x_ptr, window_ptr, index, channels, mask_c, num_inputs,
    stride_x_pos, stride_window_c,
    TAPS: tl.constexpr,
):  # fmt: skip
    """history[index, channels] as fp32; indices past ``num_inputs`` read 0."""
    in_window = index < TAPS - 1
    from_window = tl.load(
        window_ptr + channels[None, :] * stride_window_c + index[:, None],
        mask=in_window[:, None] & mask_c[None, :] & (index[:, None] >= 0),
        other=0.0,
    )
    x_index = index - (TAPS - 1)
    from_x = tl.load(
        x_ptr + x_index[:, None] * stride_x_pos + channels[None, :],
        mask=((~in_window) & (x_index < num_inputs))[:, None] & mask_c[None, :],
        other=0.0,
    )
    return tl.where(in_window[:, None], from_window.to(tl.float32), from_x.to(tl.float32))


@triton.jit
def _conv_activated(
    x_ptr, window_ptr, weight_ptr, bias_ptr, positions, channels, mask_c, num_inputs,
    stride_x_pos, stride_w_c, stride_window_c,
    HAS_BIAS: tl.constexpr,
    TAPS: tl.constexpr,
    BLOCK_P: tl.constexpr,
    BLOCK_C: tl.constexpr,
    ACTIVATION: tl.constexpr,
):  # fmt: skip
    """act(sum over taps of weight[c, tap] * history[p + tap, c] + bias[c]) as fp32 [P, C]."""
    acc = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    for tap in tl.static_range(TAPS):
        weight = tl.load(weight_ptr + channels * stride_w_c + tap, mask=mask_c, other=0.0)
        values = _load_history(
            x_ptr, window_ptr, positions + tap, channels, mask_c, num_inputs,
            stride_x_pos, stride_window_c, TAPS,
        )  # fmt: skip
        acc += values * weight.to(tl.float32)[None, :]
    if HAS_BIAS:
        acc += tl.load(bias_ptr + channels, mask=mask_c, other=0.0).to(tl.float32)[None, :]
    return _activate(acc, ACTIVATION)


@triton.jit
def _causal_conv1d_prefill_kernel(
    x_ptr, weight_ptr, bias_ptr, window_ptr, length_ptr, y_ptr, final_window_ptr,
    num_tokens, num_channels,
    stride_x_t, stride_w_c, stride_window_c, stride_y_t, stride_final_c,
    HAS_BIAS: tl.constexpr,
    TAPS: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_C: tl.constexpr,
    ACTIVATION: tl.constexpr,
):  # fmt: skip
    pid_t = tl.program_id(0)
    channels = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_c = channels < num_channels
    positions = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    length = tl.load(length_ptr)

    y = _conv_activated(
        x_ptr, window_ptr, weight_ptr, bias_ptr, positions, channels, mask_c, num_tokens,
        stride_x_t, stride_w_c, stride_window_c, HAS_BIAS, TAPS, BLOCK_T, BLOCK_C, ACTIVATION,
    )  # fmt: skip
    y = tl.where((positions < length)[:, None], y, 0.0)
    mask_y = (positions < num_tokens)[:, None] & mask_c[None, :]
    y_offs = positions[:, None] * stride_y_t + channels[None, :]
    tl.store(y_ptr + y_offs, y.to(y_ptr.dtype.element_ty), mask=mask_y)

    if pid_t == 0:
        # The window ending at x[length - 1] is history[length .. length + K - 2].
        slots = tl.arange(0, BLOCK_T)
        mask_slots = slots < TAPS - 1
        window = _load_history(
            x_ptr, window_ptr, length + slots, channels, mask_c, num_tokens,
            stride_x_t, stride_window_c, TAPS,
        )  # fmt: skip
        offs = channels[None, :] * stride_final_c + slots[:, None]
        mask = mask_slots[:, None] & mask_c[None, :]
        tl.store(final_window_ptr + offs, window.to(final_window_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _causal_conv1d_update_kernel(
    x_ptr, weight_ptr, bias_ptr, window_ptr, y_ptr, windows_ptr,
    width, num_channels,
    stride_x_r, stride_x_w, stride_w_c, stride_window_r, stride_window_c,
    stride_y_r, stride_y_w, stride_ws_r, stride_ws_w, stride_ws_c,
    HAS_BIAS: tl.constexpr,
    TAPS: tl.constexpr,
    BLOCK_W: tl.constexpr,
    BLOCK_C: tl.constexpr,
    ACTIVATION: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0).to(tl.int64)
    channels = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_c = channels < num_channels
    positions = tl.arange(0, BLOCK_W)
    mask_out = (positions < width)[:, None] & mask_c[None, :]
    x_row = x_ptr + row * stride_x_r
    window_row = window_ptr + row * stride_window_r

    y = _conv_activated(
        x_row, window_row, weight_ptr, bias_ptr, positions, channels, mask_c, width,
        stride_x_w, stride_w_c, stride_window_c, HAS_BIAS, TAPS, BLOCK_W, BLOCK_C, ACTIVATION,
    )  # fmt: skip
    y_offs = row * stride_y_r + positions[:, None] * stride_y_w + channels[None, :]
    tl.store(y_ptr + y_offs, y.to(y_ptr.dtype.element_ty), mask=mask_out)

    # windows[row, i, :, m] = history[i + 1 + m]
    for slot in tl.static_range(TAPS - 1):
        values = _load_history(
            x_row, window_row, positions + 1 + slot, channels, mask_c, width,
            stride_x_w, stride_window_c, TAPS,
        )  # fmt: skip
        offs = (
            row * stride_ws_r + positions[:, None] * stride_ws_w
            + channels[None, :] * stride_ws_c + slot
        )  # fmt: skip
        tl.store(windows_ptr + offs, values.to(windows_ptr.dtype.element_ty), mask=mask_out)


def _check_unit_strides(**tensors: torch.Tensor | None) -> None:
    for name, tensor in tensors.items():
        if tensor is not None and tensor.stride(-1) != 1:
            raise ValueError(f"{name} must be contiguous in its last dimension")


def launch_causal_conv1d_prefill(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    initial_window: torch.Tensor,
    length: torch.Tensor,
    y: torch.Tensor,
    final_window: torch.Tensor,
    activation: str = "silu",
) -> None:
    """Run the prefill kernel into preallocated ``y`` [T, C] and ``final_window`` [C, K - 1]."""
    num_tokens, num_channels = x.shape
    taps = weight.shape[1]
    if taps < 2 or taps - 1 > BLOCK_POSITIONS:
        raise ValueError(f"conv kernel size {taps} is outside 2..{BLOCK_POSITIONS + 1}")
    _check_unit_strides(
        x=x, weight=weight, bias=bias, initial_window=initial_window, y=y, final=final_window
    )
    grid = (
        max(1, triton.cdiv(num_tokens, BLOCK_POSITIONS)),
        triton.cdiv(num_channels, BLOCK_CHANNELS),
    )
    _causal_conv1d_prefill_kernel[grid](
        x, weight, bias if bias is not None else weight, initial_window, length, y, final_window,
        num_tokens, num_channels,
        x.stride(0), weight.stride(0), initial_window.stride(0), y.stride(0),
        final_window.stride(0),
        HAS_BIAS=bias is not None,
        TAPS=taps,
        BLOCK_T=BLOCK_POSITIONS,
        BLOCK_C=BLOCK_CHANNELS,
        ACTIVATION=activation_code(activation),
    )  # fmt: skip


def causal_conv1d_prefill(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    initial_window: torch.Tensor,
    length: torch.Tensor,
    activation: str = "silu",
) -> tuple[torch.Tensor, torch.Tensor]:
    y = torch.empty_like(x)
    final_window = torch.empty_like(initial_window)
    launch_causal_conv1d_prefill(
        x, weight, bias, initial_window, length, y, final_window, activation
    )
    return y, final_window


causal_conv1d_prefill.__doc__ = reference.causal_conv1d_prefill.__doc__


def launch_causal_conv1d_update(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    window: torch.Tensor,
    y: torch.Tensor,
    windows: torch.Tensor,
    activation: str = "silu",
) -> None:
    """Run the update kernel into preallocated ``y`` [R, W, C] and ``windows`` [R, W, C, K-1]."""
    num_rows, width, num_channels = x.shape
    taps = weight.shape[1]
    if taps < 2:
        raise ValueError(f"conv kernel size {taps} must be at least 2")
    _check_unit_strides(x=x, weight=weight, bias=bias, window=window, y=y, windows=windows)
    if num_rows == 0:
        return
    grid = (num_rows, triton.cdiv(num_channels, BLOCK_CHANNELS))
    _causal_conv1d_update_kernel[grid](
        x, weight, bias if bias is not None else weight, window, y, windows,
        width, num_channels,
        x.stride(0), x.stride(1), weight.stride(0), window.stride(0), window.stride(1),
        y.stride(0), y.stride(1), windows.stride(0), windows.stride(1), windows.stride(2),
        HAS_BIAS=bias is not None,
        TAPS=taps,
        BLOCK_W=max(16, triton.next_power_of_2(width)),
        BLOCK_C=BLOCK_CHANNELS,
        ACTIVATION=activation_code(activation),
    )  # fmt: skip


def causal_conv1d_update(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    window: torch.Tensor,
    activation: str = "silu",
) -> tuple[torch.Tensor, torch.Tensor]:
    num_rows, width, num_channels = x.shape
    y = torch.empty_like(x)
    windows = window.new_empty(num_rows, width, num_channels, weight.shape[1] - 1)
    launch_causal_conv1d_update(x, weight, bias, window, y, windows, activation)
    return y, windows


causal_conv1d_update.__doc__ = reference.causal_conv1d_update.__doc__
