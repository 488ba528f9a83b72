from __future__ import annotations

import pytest
import torch

from ignition.kernels.causal_conv1d import reference
from tests.kernels.kernel_tolerances import CONV, EXACT, INTERPRETER_DTYPES, nan_like

pytestmark = pytest.mark.slow


def conv_weights(channels: int, taps: int, device, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    weight = torch.randn(channels, taps, generator=gen).to(device)
    bias = torch.randn(channels, generator=gen).to(device)
    return weight, bias


@pytest.mark.parametrize("dtype", INTERPRETER_DTYPES, ids=str)
@pytest.mark.parametrize(
    ("capacity", "length"),
    [(1, 1), (63, 63), (64, 2), (20, 0)],
    ids=["single-token", "63", "short-prompt-in-capacity-64", "empty"],
)
def test_prefill_matches_reference(capacity, length, dtype, device):
    from ignition.kernels.causal_conv1d import triton

    gen = torch.Generator().manual_seed(capacity)
    channels = 70  # crosses a channel block boundary
    x = torch.randn(capacity, channels, generator=gen).to(dtype).to(device)
    window = torch.randn(channels, 3, generator=gen).to(dtype).to(device)
    weight, bias = conv_weights(channels, 4, device)
    length_tensor = torch.tensor([length], dtype=torch.int32, device=device)
    y, final = nan_like(x), nan_like(window)
    triton.launch_causal_conv1d_prefill(x, weight, bias, window, length_tensor, y, final)
    expected_y, expected_final = reference.causal_conv1d_prefill(
        x, weight, bias, window, length_tensor
    )
    torch.testing.assert_close(y, expected_y, **CONV[dtype])
    torch.testing.assert_close(final, expected_final, **EXACT)


@pytest.mark.parametrize("dtype", INTERPRETER_DTYPES, ids=str)
@pytest.mark.parametrize(("rows", "width"), [(1, 1), (4, 3), (2, 8)])
def test_update_matches_reference(rows, width, dtype, device):
    from ignition.kernels.causal_conv1d import triton

    gen = torch.Generator().manual_seed(rows * 10 + width)
    channels = 70
    x = torch.randn(rows, width, channels, generator=gen).to(dtype).to(device)
    window = torch.randn(rows, channels, 3, generator=gen).to(dtype).to(device)
    weight, bias = conv_weights(channels, 4, device)
    y, windows = nan_like(x), nan_like(window, rows, width, channels, 3)
    triton.launch_causal_conv1d_update(x, weight, bias, window, y, windows)
    expected_y, expected_windows = reference.causal_conv1d_update(x, weight, bias, window)
    torch.testing.assert_close(y, expected_y, **CONV[dtype])
    torch.testing.assert_close(windows, expected_windows, **EXACT)


def test_update_without_bias_and_with_kernel_size_two_matches_reference(device):
    from ignition.kernels.causal_conv1d import triton

    gen = torch.Generator().manual_seed(5)
    x = torch.randn(3, 2, 16, generator=gen).to(device)
    window = torch.randn(3, 16, 1, generator=gen).to(device)
    weight, _ = conv_weights(16, 2, device)
    y, windows = triton.causal_conv1d_update(x, weight, None, window)
    expected_y, expected_windows = reference.causal_conv1d_update(x, weight, None, window)
    torch.testing.assert_close(y, expected_y, **CONV[torch.float32])
    torch.testing.assert_close(windows, expected_windows, **EXACT)


ACTIVATIONS = ["silu", "gelu", "gelu_pytorch_tanh", "gelu_new", "quick_gelu", "relu"]


def test_the_kernel_knows_every_activation_the_model_accepts():
    from ignition.kernels.activations import ACTIVATIONS as TABLE
    from ignition.kernels.causal_conv1d import triton

    assert set(triton.ACTIVATION_CODES) == set(TABLE)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_prefill_and_update_apply_the_models_activation_as_the_reference(activation, device):
    """Issue 38, 3.10: a GDN short convolution under config.json's hidden_act."""
    from ignition.kernels.causal_conv1d import triton

    gen = torch.Generator().manual_seed(7)
    channels = 70
    weight, bias = conv_weights(channels, 4, device)
    x = torch.randn(20, channels, generator=gen).to(device)
    window = torch.randn(channels, 3, generator=gen).to(device)
    length = torch.tensor([17], dtype=torch.int32, device=device)
    y, _ = triton.causal_conv1d_prefill(x, weight, bias, window, length, activation)
    expected, _ = reference.causal_conv1d_prefill(x, weight, bias, window, length, activation)
    torch.testing.assert_close(y, expected, **CONV[torch.float32])
    rows = torch.randn(2, 3, channels, generator=gen).to(device)
    windows = torch.randn(2, channels, 3, generator=gen).to(device)
    y, _ = triton.causal_conv1d_update(rows, weight, bias, windows, activation)
    expected, _ = reference.causal_conv1d_update(rows, weight, bias, windows, activation)
    torch.testing.assert_close(y, expected, **CONV[torch.float32])
    if activation != "silu":  # the activation is applied, not SiLU
        silu, _ = reference.causal_conv1d_update(rows, weight, bias, windows)
        assert not torch.allclose(y, silu, atol=1e-3)
