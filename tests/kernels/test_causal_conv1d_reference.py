from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ignition.kernels.causal_conv1d.reference import causal_conv1d_prefill, causal_conv1d_update

CONV_TOLERANCE = {"atol": 1e-5, "rtol": 1e-5}


def naive_conv_stream(inputs, weight, bias, window):
    """Token by token: [T, C] after a [C, K-1] window -> outputs [T, C], windows [T, C, K-1]."""
    outputs, windows = [], []
    for x in inputs:
        full = torch.cat([window, x[:, None]], dim=1)  # [C, K]
        y = (full * weight).sum(-1) + (bias if bias is not None else 0.0)
        outputs.append(F.silu(y))
        window = full[:, 1:]
        windows.append(window)
    return torch.stack(outputs), torch.stack(windows)


def conv_inputs(leading, channels=6, taps=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(*leading, channels, generator=gen)
    weight = torch.randn(channels, taps, generator=gen)
    bias = torch.randn(channels, generator=gen)
    return x, weight, bias


@pytest.mark.parametrize(("capacity", "length"), [(1, 1), (8, 2), (63, 63), (20, 13), (5, 0)])
def test_prefill_matches_the_token_stream_and_zeroes_the_tail(capacity, length):
    x, weight, bias = conv_inputs((capacity,))
    window = torch.randn(6, 3)
    y, final = causal_conv1d_prefill(x, weight, bias, window, torch.tensor([length]))
    if length:
        expected_y, expected_windows = naive_conv_stream(x[:length], weight, bias, window)
        torch.testing.assert_close(y[:length], expected_y, **CONV_TOLERANCE)
        torch.testing.assert_close(final, expected_windows[-1], rtol=0, atol=0)
    else:
        torch.testing.assert_close(final, window, rtol=0, atol=0)
    assert torch.equal(y[length:], torch.zeros_like(y[length:]))


def test_prefill_without_bias_matches_the_token_stream():
    x, weight, _ = conv_inputs((7,))
    window = torch.zeros(6, 3)
    y, _ = causal_conv1d_prefill(x, weight, None, window, torch.tensor([7], dtype=torch.int32))
    expected_y, _ = naive_conv_stream(x, weight, None, window)
    torch.testing.assert_close(y, expected_y, **CONV_TOLERANCE)


def test_update_keeps_the_window_after_every_position():
    x, weight, bias = conv_inputs((3, 4))
    window = torch.randn(3, 6, 3)
    y, windows = causal_conv1d_update(x, weight, bias, window)
    for r in range(3):
        expected_y, expected_windows = naive_conv_stream(x[r], weight, bias, window[r])
        torch.testing.assert_close(y[r], expected_y, **CONV_TOLERANCE)
        torch.testing.assert_close(windows[r], expected_windows, rtol=0, atol=0)


def test_update_of_width_one_continues_a_prefill():
    x, weight, bias = conv_inputs((9,))
    window = torch.randn(6, 3)
    y_all, _ = causal_conv1d_prefill(x, weight, bias, window, torch.tensor([9]))
    _, after_eight = causal_conv1d_prefill(x[:8], weight, bias, window, torch.tensor([8]))
    y_last, _ = causal_conv1d_update(x[None, 8:9], weight, bias, after_eight[None])
    torch.testing.assert_close(y_last[0, 0], y_all[8], **CONV_TOLERANCE)
