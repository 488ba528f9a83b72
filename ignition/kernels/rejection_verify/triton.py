"""Triton speculative verification: one program per row walks its offered drafts in order;
vocabulary-wide argmax in blocks keeps torch.argmax's first-maximum tie rule."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ignition.kernels.rejection_verify import reference

BLOCK_VOCAB = 1024


@triton.jit
def _row_argmax(ptr, vocab_size, BLOCK: tl.constexpr):
    """First index of the maximum of ptr[0 .. vocab_size)."""
    best_value = tl.full((), float("-inf"), dtype=tl.float32)
    best_index = tl.full((), 0, dtype=tl.int64)
    for start in range(0, vocab_size, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        values = tl.load(ptr + offs, mask=offs < vocab_size, other=float("-inf")).to(tl.float32)
        block_max = tl.max(values, axis=0)
        block_index = tl.argmax(values, axis=0).to(tl.int64) + start
        take = block_max > best_value
        best_index = tl.where(take, block_index, best_index)
        best_value = tl.where(take, block_max, best_value)
    return best_index


@triton.jit
def _rejection_verify_kernel(
    draft_tokens_ptr, draft_probs_ptr, target_probs_ptr, query_lens_ptr, uniforms_ptr,
    noise_ptr, num_accepted_ptr, output_ptr, survival_ptr,
    depth, width, vocab_size,
    stride_dt_r, stride_dp_r, stride_dp_d, stride_tp_r, stride_tp_w,
    stride_u_r, stride_n_r, stride_out_r, stride_s_r,
    GREEDY: tl.constexpr,
    BLOCK_VOCAB: tl.constexpr,
    BLOCK_W: tl.constexpr,
    BLOCK_D: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0).to(tl.int64)
    query_len = tl.load(query_lens_ptr + row)
    num_offered = tl.maximum(query_len - 1, 0)
    num_verified = tl.minimum(depth, width - 1)
    draft_row = draft_probs_ptr + row * stride_dp_r
    target_row = target_probs_ptr + row * stride_tp_r

    accepting = query_len > 0
    num_accepted = tl.full((), 0, dtype=tl.int32)
    survival = tl.full((), 1.0, dtype=tl.float32)
    for i in range(num_verified):
        is_offered = i < num_offered
        token = tl.load(draft_tokens_ptr + row * stride_dt_r + i).to(tl.int64)
        p = tl.load(target_row + i * stride_tp_w + token).to(tl.float32)
        q = tl.load(draft_row + i * stride_dp_d + token).to(tl.float32)
        ratio = tl.minimum(p / tl.maximum(q, 1.1754943508222875e-38), 1.0)
        ratio = tl.where(q > 0, ratio, tl.where(p > 0, 1.0, 0.0))
        survival = survival * tl.where(is_offered, ratio, 0.0)
        tl.store(survival_ptr + row * stride_s_r + i, survival)
        if GREEDY:
            accept = _row_argmax(target_row + i * stride_tp_w, vocab_size, BLOCK_VOCAB) == token
        else:
            accept = tl.load(uniforms_ptr + row * stride_u_r + i).to(tl.float32) < ratio
        accepting = accepting & accept & is_offered
        num_accepted += accepting.to(tl.int32)
    tail = tl.arange(0, BLOCK_D)
    tail_mask = (tail >= num_verified) & (tail < depth)
    tl.store(survival_ptr + row * stride_s_r + tail, tl.zeros((BLOCK_D,), tl.float32), tail_mask)

    stop = tl.minimum(num_accepted, width - 1)
    p_stop_row = target_row + stop * stride_tp_w
    if GREEDY:
        final = _row_argmax(p_stop_row, vocab_size, BLOCK_VOCAB)
    else:
        q_stop_row = draft_row + tl.maximum(tl.minimum(stop, depth - 1), 0) * stride_dp_d
        noise_row = noise_ptr + row * stride_n_r
        q_vocab_size = tl.minimum(depth, 1) * vocab_size  # D = 0: no draft row to read
        residual_sum = tl.full((), 0.0, dtype=tl.float32)
        best_residual = tl.full((), float("-inf"), dtype=tl.float32)
        best_residual_index = tl.full((), 0, dtype=tl.int64)
        best_target = tl.full((), float("-inf"), dtype=tl.float32)
        best_target_index = tl.full((), 0, dtype=tl.int64)
        for start in range(0, vocab_size, BLOCK_VOCAB):
            offs = start + tl.arange(0, BLOCK_VOCAB)
            mask = offs < vocab_size
            p = tl.load(p_stop_row + offs, mask=mask, other=0.0).to(tl.float32)
            q = tl.load(q_stop_row + offs, mask=offs < q_vocab_size, other=0.0).to(tl.float32)
            noise = tl.load(noise_row + offs, mask=mask, other=1.0).to(tl.float32)
            residual = tl.maximum(p - q, 0.0)
            residual_sum += tl.sum(residual, axis=0)
            race = tl.where(mask, residual / noise, float("-inf"))
            block_best = tl.max(race, axis=0)
            take = block_best > best_residual
            block_index = tl.argmax(race, axis=0).to(tl.int64) + start
            best_residual_index = tl.where(take, block_index, best_residual_index)
            best_residual = tl.where(take, block_best, best_residual)
            race = tl.where(mask, p / noise, float("-inf"))
            block_best = tl.max(race, axis=0)
            take = block_best > best_target
            block_index = tl.argmax(race, axis=0).to(tl.int64) + start
            best_target_index = tl.where(take, block_index, best_target_index)
            best_target = tl.where(take, block_best, best_target)
        use_residual = (num_accepted < num_offered) & (residual_sum > 0)
        final = tl.where(use_residual, best_residual_index, best_target_index)

    columns = tl.arange(0, BLOCK_W)
    drafts = tl.load(
        draft_tokens_ptr + row * stride_dt_r + columns,
        mask=columns < tl.minimum(num_verified, num_accepted),
        other=-1,
    ).to(tl.int64)
    tokens = tl.where(columns < num_accepted, drafts, -1)
    tokens = tl.where(columns == num_accepted, final, tokens)
    tokens = tl.where(query_len > 0, tokens, -1)
    tl.store(output_ptr + row * stride_out_r + columns, tokens, mask=columns < width)
    tl.store(num_accepted_ptr + row, num_accepted)


def launch_rejection_verify(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    query_lens: torch.Tensor,
    uniforms: torch.Tensor,
    noise: torch.Tensor,
    greedy: bool,
    num_accepted: torch.Tensor,
    output_tokens: torch.Tensor,
    survival: torch.Tensor,
) -> None:
    """Run the kernel into preallocated outputs (shapes as the reference's)."""
    num_rows, depth = draft_tokens.shape
    width, vocab_size = target_probs.shape[1:]
    tensors = {
        "draft_tokens": draft_tokens, "draft_probs": draft_probs, "target_probs": target_probs,
        "uniforms": uniforms, "noise": noise, "output_tokens": output_tokens, "survival": survival,
    }  # fmt: skip
    for name, tensor in tensors.items():
        if tensor.stride(-1) != 1:
            raise ValueError(f"{name} must be contiguous in its last dimension")
    if num_rows == 0:
        return
    _rejection_verify_kernel[(num_rows,)](
        draft_tokens, draft_probs, target_probs, query_lens, uniforms, noise,
        num_accepted, output_tokens, survival,
        depth, width, vocab_size,
        draft_tokens.stride(0), draft_probs.stride(0), draft_probs.stride(1),
        target_probs.stride(0), target_probs.stride(1),
        uniforms.stride(0), noise.stride(0), output_tokens.stride(0), survival.stride(0),
        GREEDY=bool(greedy),
        BLOCK_VOCAB=min(BLOCK_VOCAB, max(16, triton.next_power_of_2(vocab_size))),
        BLOCK_W=max(16, triton.next_power_of_2(width)),
        BLOCK_D=max(16, triton.next_power_of_2(depth)),
    )  # fmt: skip


def rejection_verify(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    query_lens: torch.Tensor,
    uniforms: torch.Tensor,
    noise: torch.Tensor,
    greedy: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    num_rows, depth = draft_tokens.shape
    width = target_probs.shape[1]
    device = target_probs.device
    num_accepted = torch.empty(num_rows, dtype=torch.int32, device=device)
    output_tokens = torch.empty(num_rows, width, dtype=torch.int64, device=device)
    survival = torch.empty(num_rows, depth, dtype=torch.float32, device=device)
    launch_rejection_verify(
        draft_tokens, draft_probs, target_probs, query_lens, uniforms, noise, greedy,
        num_accepted, output_tokens, survival,
    )  # fmt: skip
    return num_accepted, output_tokens, survival


rejection_verify.__doc__ = reference.rejection_verify.__doc__
