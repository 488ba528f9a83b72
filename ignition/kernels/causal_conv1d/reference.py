"""PyTorch reference of the short causal depthwise conv + activation: channel c at t is
``sum_j weight[c, j] * x[t - (K - 1) + j]``; a window holds the previous K - 1 inputs, oldest
first."""

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
    """Causal depthwise conv + ``activation`` over one prompt row continuing ``initial_window``.

    Shapes:
    x [T, C]; weight [C, K]; bias [C] or None; initial_window [C, K - 1]; length [1] int32
    real tokens. Returns (y [T, C] in x's dtype, zeros past length; final_window [C, K - 1],
    the last K - 1 inputs up to length - 1, initial_window itself at length 0). No host sync.
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
    # history index p holds x[p - (K - 1)]
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
    """Causal depthwise conv + ``activation`` for decode/verify rows, keeping each window.

    Shapes:
    x [R, W, C]; weight [C, K]; bias [C] or None; window [R, C, K - 1], not modified. Returns
    (y [R, W, C], windows [R, W, C, K - 1] after each position). Positions past a row's
    query length depend on padding and must not be committed.
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
