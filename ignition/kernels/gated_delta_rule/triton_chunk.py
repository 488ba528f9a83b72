"""Triton chunked gated delta rule for one prompt row: forward substitution in IEEE fp32
(docs/kernels.md)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ignition.kernels.gated_delta_rule import reference

BLOCK_V = 32
DOT_PRECISION = "tf32x3"


@triton.jit
def _chunk_gated_delta_rule_kernel(
    q_ptr, k_ptr, v_ptr, g_ptr, beta_ptr, state_ptr, o_ptr, final_state_ptr,
    num_tokens, key_dim, value_dim, scale,
    stride_q_t, stride_q_h, stride_k_t, stride_k_h, stride_v_t, stride_v_h,
    stride_g_t, stride_b_t,
    stride_s_h, stride_s_k, stride_o_t, stride_o_h, stride_f_h, stride_f_k,
    CHUNK: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_V: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):  # fmt: skip
    head = tl.program_id(0)
    offs_k = tl.arange(0, BLOCK_K)
    offs_v = tl.program_id(1) * BLOCK_V + tl.arange(0, BLOCK_V)
    offs_c = tl.arange(0, CHUNK)
    mask_k = offs_k < key_dim
    mask_v = offs_v < value_dim
    mask_kv = mask_k[:, None] & mask_v[None, :]
    strictly_lower = offs_c[:, None] > offs_c[None, :]
    causal = offs_c[:, None] >= offs_c[None, :]
    eye = tl.where(offs_c[:, None] == offs_c[None, :], 1.0, 0.0)

    state_offs = head * stride_s_h + offs_k[:, None] * stride_s_k + offs_v[None, :]
    state = tl.load(state_ptr + state_offs, mask=mask_kv, other=0.0).to(tl.float32)
    for chunk_start in range(0, num_tokens, CHUNK):
        tokens = chunk_start + offs_c
        mask_t = tokens < num_tokens  # the tail reads g = beta = 0: neutral tokens
        mask_tk = mask_t[:, None] & mask_k[None, :]
        k_offs = tokens[:, None] * stride_k_t + head * stride_k_h + offs_k[None, :]
        k = tl.load(k_ptr + k_offs, mask=mask_tk, other=0.0).to(tl.float32)  # [C, K]
        q_offs = tokens[:, None] * stride_q_t + head * stride_q_h + offs_k[None, :]
        q = tl.load(q_ptr + q_offs, mask=mask_tk, other=0.0).to(tl.float32) * scale
        v_offs = tokens[:, None] * stride_v_t + head * stride_v_h + offs_v[None, :]
        mask_tv = mask_t[:, None] & mask_v[None, :]
        v = tl.load(v_ptr + v_offs, mask=mask_tv, other=0.0).to(tl.float32)  # [C, V]
        g = tl.load(g_ptr + tokens * stride_g_t + head, mask=mask_t, other=0.0).to(tl.float32)
        beta = tl.load(beta_ptr + tokens * stride_b_t + head, mask=mask_t, other=0.0)
        beta = beta.to(tl.float32)
        g_cum = tl.cumsum(g, axis=0)  # [C]

        # Masked before exp: above the diagonal G_i - G_j > 0 could overflow.
        decay = tl.exp(tl.where(causal, g_cum[:, None] - g_cum[None, :], float("-inf")))
        kk = tl.dot(k, tl.trans(k), input_precision=DOT_PRECISION)
        a = tl.where(strictly_lower, beta[:, None] * kk * decay, 0.0)
        # Forward substitution: T[i] = e_i - A[i, :i] T[:i] (A[i, j >= i] = 0).
        inverse = eye
        for i in range(1, CHUNK):
            is_row = offs_c[:, None] == i
            a_row = tl.sum(tl.where(is_row, a, 0.0), axis=0)  # [C] = A[i, :]
            row = tl.where(offs_c == i, 1.0, 0.0) - tl.sum(a_row[:, None] * inverse, axis=0)
            inverse = tl.where(is_row, row[None, :], inverse)

        u = tl.dot(inverse, beta[:, None] * v, input_precision=DOT_PRECISION)  # [C, V]
        w = tl.dot(inverse, (beta * tl.exp(g_cum))[:, None] * k, input_precision=DOT_PRECISION)
        corrections = u - tl.dot(w, state, input_precision=DOT_PRECISION)  # [C, V]

        qk = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION)
        qk = qk * decay
        out = tl.dot(q * tl.exp(g_cum)[:, None], state, input_precision=DOT_PRECISION)
        out += tl.dot(qk, corrections, input_precision=DOT_PRECISION)
        o_offs = tokens[:, None] * stride_o_t + head * stride_o_h + offs_v[None, :]
        tl.store(o_ptr + o_offs, out.to(o_ptr.dtype.element_ty), mask=mask_tv)

        g_last = tl.sum(g, axis=0)
        k_to_end = k * tl.exp(g_last - g_cum)[:, None]
        state = state * tl.exp(g_last)
        state += tl.dot(tl.trans(k_to_end), corrections, input_precision=DOT_PRECISION)

    final_offs = head * stride_f_h + offs_k[:, None] * stride_f_k + offs_v[None, :]
    tl.store(final_state_ptr + final_offs, state, mask=mask_kv)


def launch_chunk_gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    initial_state: torch.Tensor,
    scale: float,
    out: torch.Tensor,
    final_state: torch.Tensor,
    chunk_size: int = 64,
) -> None:
    """Run the kernel into preallocated ``out`` [T, H, Dv] and fp32 ``final_state`` [H, Dk, Dv]."""
    num_tokens, num_heads, key_dim = k.shape
    value_dim = v.shape[-1]
    if chunk_size not in (16, 32, 64):
        raise ValueError(f"chunk_size must be 16, 32 or 64 for the Triton kernel, got {chunk_size}")
    tensors = {
        "q": q, "k": k, "v": v, "g": g, "beta": beta,
        "initial_state": initial_state, "out": out, "final_state": final_state,
    }  # fmt: skip
    for name, tensor in tensors.items():
        if tensor.stride(-1) != 1:
            raise ValueError(f"{name} must be contiguous in its last dimension")
    if final_state.dtype != torch.float32:
        raise ValueError(f"final_state must be float32, got {final_state.dtype}")
    grid = (num_heads, triton.cdiv(value_dim, BLOCK_V))
    _chunk_gated_delta_rule_kernel[grid](
        q, k, v, g, beta, initial_state, out, final_state,
        num_tokens, key_dim, value_dim, scale,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        g.stride(0), beta.stride(0),
        initial_state.stride(0), initial_state.stride(1), out.stride(0), out.stride(1),
        final_state.stride(0), final_state.stride(1),
        CHUNK=chunk_size,
        BLOCK_K=max(16, triton.next_power_of_2(key_dim)),
        BLOCK_V=BLOCK_V,
        DOT_PRECISION=DOT_PRECISION,
        num_stages=1,  # the chunk loop carries the state: pipelining only costs shared memory
    )  # fmt: skip


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
    _, num_heads, key_dim = k.shape
    out = torch.empty_like(v)
    final_state = torch.empty(num_heads, key_dim, v.shape[-1], dtype=torch.float32, device=v.device)
    launch_chunk_gated_delta_rule(
        q, k, v, g, beta, initial_state, scale, out, final_state, chunk_size
    )
    return out, final_state


chunk_gated_delta_rule.__doc__ = reference.chunk_gated_delta_rule.__doc__
