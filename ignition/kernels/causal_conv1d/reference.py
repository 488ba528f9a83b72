"""PyTorch reference of the short causal depthwise convolution (+ an activation, SiLU unless
the model's ``hidden_act`` names another; ``kernels.activations``) used by GDN and PLE layers.

Convention (as in Dao's causal-conv1d): with K taps, channel c at position t computes
``sum_j weight[c, j] * x[t - (K - 1) + j]``, so ``weight[:, K - 1]`` multiplies the current
input. A window holds the previous K - 1 inputs of each channel, oldest first.
"""

from __future__ import annotations

import torch

from ignition.kernels.activations import activation as activation_fn


def causal_conv1d_prefill(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    initial_window: torch.Tensor,
    length: torch.Tensor,
    activation: str = "silu",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal depthwise conv + ``activation`` over one prompt row that continues
    ``initial_window``.

    Shapes:
        x: [T, C] (T = prompt capacity); weight: [C, K]; bias: [C] or None;
        initial_window: [C, K - 1] the K - 1 inputs before x[0], oldest first (zeros for a new
            request); length: [1] int32, the real tokens (0 <= length <= T).
    Returns:
        y: [T, C] in the dtype of x, activation(conv) for t < length and zeros beyond.
        final_window: [C, K - 1] in the dtype of initial_window: the last K - 1 inputs ending
            at position length - 1, reaching back into initial_window when length < K - 1
            (length 0 returns initial_window unchanged).
    Padding: x beyond length is ignored (the window never reads it). No host sync.
    """
    num_tokens, _ = x.shape
    taps = weight.shape[1]
    history = torch.cat([initial_window.to(x.dtype).t(), x], dim=0)  # [K-1+T, C]
    # One fused multiply-add per tap over [T, C] beats a grouped F.conv1d on CPU.
    history32 = history.float()
    conv = history32[:num_tokens] * weight[:, 0].float()
    for tap in range(1, taps):
        conv.addcmul_(history32[tap : tap + num_tokens], weight[:, tap].float())
    if bias is not None:
        conv += bias.float()
    valid = torch.arange(num_tokens, device=x.device)[:, None] < length.to(x.device)
    y = torch.where(valid, activation_fn(activation)(conv), 0.0).to(x.dtype)
    # history index p holds x[p - (K - 1)], so the window ending at x[length - 1] is p in
    # [length, length + K - 2].
    window_index = length.long() + torch.arange(taps - 1, device=x.device)
    final_window = history.index_select(0, window_index).t().to(initial_window.dtype)
    return y, final_window


def causal_conv1d_update(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    window: torch.Tensor,
    activation: str = "silu",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal depthwise conv + ``activation`` for decode/verify rows, keeping the window after
    each step.

    Shapes:
        x: [R, W, C]; weight: [C, K]; bias: [C] or None; window: [R, C, K - 1] oldest first
        (not modified).
    Returns:
        y: [R, W, C] in the dtype of x; windows: [R, W, C, K - 1] in the dtype of window, where
        windows[:, i] is the window after consuming position i (commit copies
        windows[:, accepted - 1]).
    Padding: every position is computed; outputs and windows at positions past a row's query
    length depend on padded inputs and must simply not be committed.
    """
    taps = weight.shape[1]
    width = x.shape[1]
    history = torch.cat([window.to(x.dtype), x.transpose(1, 2)], dim=-1)  # [R, C, K-1+W]
    taps_view = history.float().unfold(-1, taps, 1)  # [R, C, W, K]
    conv = (taps_view * weight.float()[None, :, None, :]).sum(-1)  # [R, C, W]
    if bias is not None:
        conv = conv + bias.float()[None, :, None]
    y = activation_fn(activation)(conv).transpose(1, 2).to(x.dtype)
    windows = history.unfold(-1, taps - 1, 1)[:, :, 1 : width + 1]  # [R, C, W, K-1]
    return y, windows.permute(0, 2, 1, 3).to(window.dtype).contiguous()
