"""Triton recurrent gated delta rule for decode/verify rows, one state written per position;
one program per (row, head, BLOCK_V value columns), the update being per column."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ignition.kernels.gated_delta_rule import reference

BLOCK_V = 32


@triton.jit
def _recurrent_gated_delta_rule_kernel(
    q_ptr, k_ptr, v_ptr, g_ptr, beta_ptr, state_ptr, o_ptr, states_ptr,
    width, key_dim, value_dim, scale,
    stride_q_r, stride_q_w, stride_q_h,
    stride_k_r, stride_k_w, stride_k_h,
    stride_v_r, stride_v_w, stride_v_h,
    stride_g_r, stride_g_w,
    stride_b_r, stride_b_w,
    stride_s_r, stride_s_h, stride_s_k,
    stride_o_r, stride_o_w, stride_o_h,
    stride_ss_r, stride_ss_w, stride_ss_h, stride_ss_k,
    BLOCK_K: tl.constexpr,
    BLOCK_V: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1)
    offs_k = tl.arange(0, BLOCK_K)
    offs_v = tl.program_id(2) * BLOCK_V + tl.arange(0, BLOCK_V)
    mask_k = offs_k < key_dim
    mask_v = offs_v < value_dim
    mask_kv = mask_k[:, None] & mask_v[None, :]

    state_offs = row * stride_s_r + head * stride_s_h + offs_k[:, None] * stride_s_k
    state = tl.load(state_ptr + state_offs + offs_v[None, :], mask=mask_kv, other=0.0)
    state = state.to(tl.float32)  # [BLOCK_K, BLOCK_V]
    for i in range(width):
        k_offs = row * stride_k_r + i * stride_k_w + head * stride_k_h + offs_k
        k = tl.load(k_ptr + k_offs, mask=mask_k, other=0.0).to(tl.float32)
        q_offs = row * stride_q_r + i * stride_q_w + head * stride_q_h + offs_k
        q = tl.load(q_ptr + q_offs, mask=mask_k, other=0.0).to(tl.float32) * scale
        v_offs = row * stride_v_r + i * stride_v_w + head * stride_v_h + offs_v
        v = tl.load(v_ptr + v_offs, mask=mask_v, other=0.0).to(tl.float32)
        decay = tl.exp(tl.load(g_ptr + row * stride_g_r + i * stride_g_w + head).to(tl.float32))
        beta = tl.load(beta_ptr + row * stride_b_r + i * stride_b_w + head).to(tl.float32)

        state = state * decay
        predicted = tl.sum(state * k[:, None], axis=0)  # [BLOCK_V] = S^T k
        delta = beta * (v - predicted)
        state = state + k[:, None] * delta[None, :]
        out = tl.sum(state * q[:, None], axis=0)

        o_offs = row * stride_o_r + i * stride_o_w + head * stride_o_h + offs_v
        tl.store(o_ptr + o_offs, out.to(o_ptr.dtype.element_ty), mask=mask_v)
        states_offs = (
            row * stride_ss_r + i * stride_ss_w + head * stride_ss_h
            + offs_k[:, None] * stride_ss_k + offs_v[None, :]
        )  # fmt: skip
        tl.store(states_ptr + states_offs, state, mask=mask_kv)


def launch_recurrent_gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    initial_state: torch.Tensor,
    scale: float,
    out: torch.Tensor,
    states: torch.Tensor,
) -> None:
    """Run the kernel into preallocated ``out`` [R, W, H, Dv] and fp32 ``states``."""
    num_rows, width, num_heads, key_dim = k.shape
    value_dim = v.shape[-1]
    tensors = {
        "q": q, "k": k, "v": v, "g": g, "beta": beta,
        "initial_state": initial_state, "out": out, "states": states,
    }  # fmt: skip
    for name, tensor in tensors.items():
        if tensor.stride(-1) != 1:
            raise ValueError(f"{name} must be contiguous in its last dimension")
    if states.dtype != torch.float32:
        raise ValueError(f"states must be float32, got {states.dtype}")
    if num_rows == 0 or width == 0:
        return
    grid = (num_rows, num_heads, triton.cdiv(value_dim, BLOCK_V))
    _recurrent_gated_delta_rule_kernel[grid](
        q, k, v, g, beta, initial_state, out, states,
        width, key_dim, value_dim, scale,
        q.stride(0), q.stride(1), q.stride(2),
        k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2),
        g.stride(0), g.stride(1),
        beta.stride(0), beta.stride(1),
        initial_state.stride(0), initial_state.stride(1), initial_state.stride(2),
        out.stride(0), out.stride(1), out.stride(2),
        states.stride(0), states.stride(1), states.stride(2), states.stride(3),
        BLOCK_K=max(16, triton.next_power_of_2(key_dim)),
        BLOCK_V=BLOCK_V,
    )  # fmt: skip


def recurrent_gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    initial_state: torch.Tensor,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    num_rows, width, num_heads, key_dim = k.shape
    out = torch.empty_like(v)
    states = torch.empty(
        num_rows, width, num_heads, key_dim, v.shape[-1], dtype=torch.float32, device=v.device
    )
    launch_recurrent_gated_delta_rule(q, k, v, g, beta, initial_state, scale, out, states)
    return out, states


recurrent_gated_delta_rule.__doc__ = reference.recurrent_gated_delta_rule.__doc__
