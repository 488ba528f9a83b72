"""PyTorch reference of the gated delta rule (GDN linear attention), chunked and recurrent.

Per head the state S is [Dk, Dv] (fp32) and one token (q, k, v, g, beta) does

    S = exp(g) S;  S = S + k (beta (v - S^T k))^T;  o = S^T (q * scale)

which is S_t = exp(g_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T. With g = 0 and
beta = 0 a token leaves S unchanged: that is the padding contract of both entry points.

The chunked form (prompt rows) follows the WY/UT representation used by flash-linear-attention:
inside a chunk with in-chunk cumulative decay G_i = sum_{t<=i} g_t the per-token corrections

    U = T (beta V) - T (beta exp(G) K) S_0,    T = (I + A)^{-1},
    A_ij = beta_i exp(G_i - G_j) k_i . k_j  for j < i (strictly lower triangular)

give S_C = exp(G_C) S_0 + sum_j exp(G_C - G_j) k_j u_j^T and
o = scale (q exp(G)) S_0 + scale ((Q K^T) * exp(G_i - G_j), j <= i) U. Everything except
the chunk-to-chunk state hand-off is batched over chunks and heads.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _chunk_local_terms(
    k: torch.Tensor, v: torch.Tensor, g_cum: torch.Tensor, beta: torch.Tensor, decay: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """UT transform per chunk: (w, u) with U = u - w S_0. Inputs [N, H, C, *] fp32, ``decay``
    the causal exp(G_i - G_j) (zero above the diagonal).

    One unitriangular solve of (I + A) against [beta V, beta exp(G) K] (the solver reads only
    A's strictly lower triangle, so the diagonal of ``decay`` does not matter): no explicit
    inverse T, no identity right-hand side (as transformers' reference does it).
    """
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
    """Gated delta rule over one prompt row, chunk by chunk (no per-token loop).

    Shapes:
        q, k: [T, H, Dk], already L2-normalised by the caller.
        v: [T, H, Dv].
        g: [T, H] log decay (<= 0); beta: [T, H] in [0, 1].
        initial_state: [H, Dk, Dv] fp32 (not modified).
        scale: multiplies q (usually Dk ** -0.5).
    Returns:
        o: [T, H, Dv] in the dtype of v; final_state: [H, Dk, Dv] fp32, the state after all T
        tokens.
    Computes in fp32 whatever the inputs' dtype (bf16 inputs are upcast, o cast back), as
    transformers' and fla's references do.
    Padding: tokens with g = 0 and beta = 0 leave the state unchanged, so a row padded to its
    capacity T gives the true final state; the outputs at padded tokens are finite but
    meaningless. T need not be a multiple of ``chunk_size`` (the tail is padded internally);
    the Triton kernel accepts chunk_size 16, 32 or 64. Differentiable (training uses it).
    """
    num_tokens, num_heads, _ = k.shape
    value_dim = v.shape[-1]
    num_chunks = max(1, -(-num_tokens // chunk_size))
    pad = num_chunks * chunk_size - num_tokens

    def chunked(x: torch.Tensor) -> torch.Tensor:
        # [T, H] or [T, H, D] -> contiguous [N, H, C, D or 1] fp32, zero padded (g = beta = 0
        # is neutral); contiguous once here so no batched product below copies its operand.
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
        q, k: [R, W, H, Dk] (L2-normalised); v: [R, W, H, Dv]; g, beta: [R, W, H];
        initial_state: [R, H, Dk, Dv] fp32 (not modified).
    Returns:
        o: [R, W, H, Dv] in the dtype of v; states: [R, W, H, Dk, Dv] fp32 where states[:, i] is
        the state after consuming position i, so committing an accepted length a >= 1 copies
        states[:, a - 1] without recomputation.
    Padding: positions (and whole rows) with g = 0 and beta = 0 leave the state unchanged, so
    states at and after the padding repeat the last real state. Loops over the W positions
    only; rows and heads are batched.
    """
    num_rows, width, num_heads, key_dim = k.shape
    value_dim = v.shape[-1]
    state = initial_state.float()
    states = torch.empty(num_rows, width, num_heads, key_dim, value_dim, device=v.device)
    out = torch.empty(num_rows, width, num_heads, value_dim, device=v.device)
    # Memory bound on CPU, so each position reads the old state once (S^T k and S^T q in one
    # matmul) and writes the new one straight into ``states``:
    #   S' = a S + k d^T,  d = beta (v - a S^T k),  o = S'^T q = a S^T q + (k . q) d.
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
