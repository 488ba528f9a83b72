"""PyTorch reference of the gated delta rule (GDN linear attention), chunked and recurrent.

Per head, state S [Dk, Dv] fp32; per token S = exp(g) S; S = S + k (beta (v - S^T k))^T;
o = S^T (q * scale). A token with g = 0 and beta = 0 leaves S unchanged (the padding contract).
The chunked form's WY/UT derivation: docs/kernels.md.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _chunk_local_terms(
    k: torch.Tensor, v: torch.Tensor, g_cum: torch.Tensor, beta: torch.Tensor, decay: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """UT transform per chunk: (w, u) with U = u - w S_0; inputs [N, H, C, *] fp32, ``decay``
    the causal exp(G_i - G_j); one unitriangular solve, no explicit inverse."""
    value_dim = v.shape[-1]
    k_beta = beta[..., None] * k
    a = (k_beta @ k.transpose(-1, -2)) * decay  # [N, H, C, C]
    rhs = torch.cat([beta[..., None] * v, k_beta * g_cum.exp()[..., None]], dim=-1)
    solved = torch.linalg.solve_triangular(a, rhs, upper=False, unitriangular=True)
    return solved[..., value_dim:], solved[..., :value_dim]


def chunk_gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    initial_state: torch.Tensor,
    scale: float,
    chunk_size: int = 64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gated delta rule over one prompt row, chunk by chunk.

    Shapes:
    q, k [T, H, Dk] L2-normalised; v [T, H, Dv]; g [T, H] log decay (<= 0); beta [T, H] in
    [0, 1]; initial_state [H, Dk, Dv] fp32, not modified; ``scale`` multiplies q. Returns
    (o [T, H, Dv] in v's dtype, final_state [H, Dk, Dv] fp32), computed in fp32. Padded
    tokens (g = beta = 0) keep the state; their outputs are meaningless. Any T (Triton:
    chunk_size 16, 32 or 64). Differentiable.
    """
    num_tokens, num_heads, _ = k.shape
    value_dim = v.shape[-1]
    num_chunks = max(1, -(-num_tokens // chunk_size))
    pad = num_chunks * chunk_size - num_tokens

    def chunked(x: torch.Tensor) -> torch.Tensor:
        # -> contiguous [N, H, C, D or 1] fp32, zero padded (g = beta = 0 is neutral)
        x = x.float() if x.dim() == 3 else x.float()[..., None]
        x = F.pad(x, (0, 0, 0, 0, 0, pad))
        return x.reshape(num_chunks, chunk_size, num_heads, -1).transpose(1, 2).contiguous()

    qc, kc, vc = chunked(q) * scale, chunked(k), chunked(v)
    gc = chunked(g).squeeze(-1)  # [N, H, C]
    betac = chunked(beta).squeeze(-1)
    g_cum = gc.cumsum(-1)
    causal = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=k.device).tril()
    # Mask before exp: the upper triangle would overflow exp(G_i - G_j) for j > i.
    log_decay = (g_cum[..., :, None] - g_cum[..., None, :]).masked_fill(~causal, -torch.inf)
    decay = log_decay.exp()  # [N, H, C, C], zero above the diagonal
    w, u = _chunk_local_terms(kc, vc, g_cum, betac, decay)

    qk = (qc @ kc.transpose(-1, -2)) * decay  # [N, H, C, C]
    q_decayed = qc * g_cum.exp()[..., None]
    # decay from token to chunk end, stored [N, H, Dk, C] so the state update reads it as is
    k_to_end = (kc * (g_cum[..., -1:] - g_cum).exp()[..., None]).transpose(-1, -2).contiguous()
    chunk_decay = g_cum[..., -1].exp()  # [N, H]

    state = initial_state.float().clone()  # [H, Dk, Dv]
    outs = []
    for n in range(num_chunks):
        corrections = u[n] - w[n] @ state  # [H, C, Dv]
        outs.append(torch.baddbmm(qk[n] @ corrections, q_decayed[n], state))
        state = torch.baddbmm(state * chunk_decay[n][:, None, None], k_to_end[n], corrections)
    o = torch.stack(outs).transpose(1, 2).reshape(num_chunks * chunk_size, num_heads, value_dim)
    return o[:num_tokens].to(v.dtype), state


def recurrent_gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    initial_state: torch.Tensor,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gated delta rule for decode/verify rows, keeping the state after every position.

    Shapes:
    q, k [R, W, H, Dk] L2-normalised; v [R, W, H, Dv]; g, beta [R, W, H]; initial_state
    [R, H, Dk, Dv] fp32, not modified. Returns (o [R, W, H, Dv] in v's dtype, states
    [R, W, H, Dk, Dv] fp32, states[:, i] after position i). Padded positions (g = beta = 0)
    repeat the last real state.
    """
    num_rows, width, num_heads, key_dim = k.shape
    value_dim = v.shape[-1]
    state = initial_state.float()
    states = torch.empty(num_rows, width, num_heads, key_dim, value_dim, device=v.device)
    out = torch.empty(num_rows, width, num_heads, value_dim, device=v.device)
    # One read of the old state per position: S' = a S + k d^T, d = beta (v - a S^T k),
    # o = a S^T q + (k . q) d.
    for i in range(width):
        k_i, v_i, q_i = k[:, i].float(), v[:, i].float(), q[:, i].float() * scale  # [R, H, D]
        decay = g[:, i].float().exp()[..., None]  # [R, H, 1]
        projected = torch.stack([k_i, q_i], dim=-2) @ state  # [R, H, 2, Dv]
        delta = beta[:, i].float()[..., None] * (v_i - decay * projected[..., 0, :])
        key_dot_query = (k_i * q_i).sum(-1, keepdim=True)
        out[:, i] = decay * projected[..., 1, :] + key_dot_query * delta
        torch.mul(state, decay[..., None], out=states[:, i])
        states[:, i].addcmul_(k_i[..., :, None], delta[..., None, :])
        state = states[:, i]
    return out.to(v.dtype), states
