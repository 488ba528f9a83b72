"""PyTorch reference of speculative verification: greedy and sampled (rejection) acceptance,
which preserves the target distribution exactly (docs/kernels.md)."""

from __future__ import annotations

import torch


def acceptance_ratio(target_prob: torch.Tensor, draft_prob: torch.Tensor) -> torch.Tensor:
    """min(1, p / q), with q = 0 read as certain acceptance when p > 0 and rejection otherwise."""
    ratio = target_prob / draft_prob.clamp_min(torch.finfo(torch.float32).tiny)
    return torch.where(draft_prob > 0, ratio.clamp(max=1.0), (target_prob > 0).float())


def draft_ratios(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    query_lens: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(offered [R, D] bool, ratio [R, D] = min(1, p / q) where verified, else 0)."""
    num_rows, depth = draft_tokens.shape
    device = target_probs.device
    num_verified = min(depth, target_probs.shape[1] - 1)
    qlen = query_lens.to(device=device, dtype=torch.int64)
    offered = torch.arange(depth, device=device)[None, :] < (qlen[:, None] - 1)
    tokens = draft_tokens[:, :num_verified, None]
    p_draft = target_probs[:, :num_verified].float().gather(-1, tokens).squeeze(-1)
    q_draft = draft_probs[:, :num_verified].float().gather(-1, tokens).squeeze(-1)
    ratio = torch.zeros(num_rows, depth, device=device)
    ratio[:, :num_verified] = acceptance_ratio(p_draft, q_draft)
    return offered, ratio


def rejection_verify(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    query_lens: torch.Tensor,
    uniforms: torch.Tensor,
    noise: torch.Tensor,
    greedy: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Accept a prefix of each row's drafts and emit the replacement or bonus token.

    Shapes:
    draft_tokens [R, D] int64; draft_probs [R, D, V] (q); target_probs [R, W, V] (p);
    query_lens [R] int32 = 1 + drafts offered (<= min(D + 1, W)), 0 inactive; uniforms
    [R, W] in [0, 1); noise [R, V] Exp(1); greedy: argmax acceptance. Returns
    (num_accepted [R] int32; output_tokens [R, W] int64: accepted drafts, the replacement or
    bonus, then -1; survival [R, D] fp32 cumulative min(1, p/q), 0 beyond). D may be 0.
    Inactive rows: 0 accepted, all -1, zero survival.
    """
    num_rows, depth = draft_tokens.shape
    width = target_probs.shape[1]
    device = target_probs.device
    num_verified = min(depth, width - 1)  # drafts that have a verifying target position
    qlen = query_lens.to(device=device, dtype=torch.int64)
    offered, ratio = draft_ratios(draft_tokens, draft_probs, target_probs, query_lens)
    survival = torch.where(offered, ratio, 0.0).cumprod(dim=1)

    accepts = torch.zeros(num_rows, depth, dtype=torch.bool, device=device)
    if greedy:
        target_argmax = target_probs[:, :num_verified].argmax(dim=-1)
        accepts[:, :num_verified] = target_argmax == draft_tokens[:, :num_verified]
    else:
        accepts[:, :num_verified] = uniforms[:, :num_verified].float() < ratio[:, :num_verified]
    accepts &= offered
    num_accepted = accepts.int().cumprod(dim=1).sum(dim=1)  # [R] (int64)

    rows = torch.arange(num_rows, device=device)
    stop = num_accepted.clamp(max=width - 1)
    p_stop = target_probs[rows, stop].float()  # [R, V]
    if greedy:
        final = p_stop.argmax(dim=-1)
    else:
        is_rejected = num_accepted < (qlen - 1)
        if depth:
            q_stop = draft_probs[rows, stop.clamp(max=depth - 1)].float()
        else:  # width-one programs (D = 0) only ever draw the bonus token
            q_stop = torch.zeros_like(p_stop)
        residual = (p_stop - q_stop).clamp_min(0.0)
        residual = torch.where(residual.sum(-1, keepdim=True) > 0, residual, p_stop)
        weights = torch.where(is_rejected[:, None], residual, p_stop)
        final = (weights / noise.float()).argmax(dim=-1)

    is_active = qlen > 0
    column = torch.arange(width, device=device)[None, :]
    drafts = torch.full((num_rows, width), -1, dtype=torch.int64, device=device)
    drafts[:, :num_verified] = draft_tokens[:, :num_verified]
    output = torch.where(column < num_accepted[:, None], drafts, -1)
    output = torch.where(column == num_accepted[:, None], final[:, None], output)
    output = torch.where(is_active[:, None], output, -1)
    return num_accepted.to(torch.int32), output, survival
