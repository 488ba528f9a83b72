"""Naive gated-delta-rule recurrence and random GDN inputs shared by the kernel tests."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def naive_gated_delta_rule(q, k, v, g, beta, state, scale):
    """Per-token loop of the contract's rule for one row: [T, H, D] inputs, [H, Dk, Dv] state.

    Returns the outputs [T, H, Dv] and the states after each token [T, H, Dk, Dv] (fp32).
    """
    state = state.double().clone()
    outputs, states = [], []
    for t in range(q.shape[0]):
        for h in range(q.shape[1]):
            s = state[h] * torch.exp(g[t, h].double())
            kt, vt = k[t, h].double(), v[t, h].double()
            s = s + torch.outer(kt, beta[t, h].double() * (vt - s.t() @ kt))
            state[h] = s
        outputs.append(torch.einsum("hkv,hk->hv", state, q[t].double() * scale))
        states.append(state.clone())
    return torch.stack(outputs).float(), torch.stack(states).float()


def gdn_inputs(
    leading: tuple[int, ...],
    *,
    num_heads: int = 2,
    key_dim: int = 16,
    value_dim: int = 32,
    dtype: torch.dtype = torch.float32,
    seed: int = 0,
):
    """q, k (L2-normalised), v, g (<= 0), beta in (0, 1) with shape ``leading + (H, ...)``."""
    gen = torch.Generator().manual_seed(seed)
    shape = (*leading, num_heads)
    q = F.normalize(torch.randn(*shape, key_dim, generator=gen), dim=-1).to(dtype)
    k = F.normalize(torch.randn(*shape, key_dim, generator=gen), dim=-1).to(dtype)
    v = torch.randn(*shape, value_dim, generator=gen).to(dtype)
    g = -F.softplus(torch.randn(*shape, generator=gen)) * 0.5
    beta = torch.sigmoid(torch.randn(*shape, generator=gen))
    return q, k, v, g, beta


def random_state(leading: tuple[int, ...], num_heads: int, key_dim: int, value_dim: int, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*leading, num_heads, key_dim, value_dim, generator=gen) * 0.3


def repeated_key_inputs(num_tokens: int, *, num_heads: int = 2, key_dim: int = 16, value_dim=32):
    """One key repeated with beta near 1 and no decay: A is almost all ones below the diagonal,
    whose powers grow binomially, the hard case for inverting I + A inside a chunk."""
    gen = torch.Generator().manual_seed(7)
    key = F.normalize(torch.randn(key_dim, generator=gen), dim=0)
    k = key.expand(num_tokens, num_heads, key_dim).contiguous()
    q = F.normalize(torch.randn(num_tokens, num_heads, key_dim, generator=gen), dim=-1)
    v = torch.randn(num_tokens, num_heads, value_dim, generator=gen)
    g = torch.zeros(num_tokens, num_heads)
    beta = torch.full((num_tokens, num_heads), 0.99)
    return q, k, v, g, beta
