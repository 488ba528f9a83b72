"""One representative call per Triton kernel, for the CUDA compile check (CPU tensors only).

Shapes are the real model's (head dims 128, vocab 4096) so that block sizes and register use
match what a GPU build compiles; the calls are intercepted before launch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

LaunchCase = tuple[Any, str, Callable[[], Any]]


def _paged_cases(dtype: torch.dtype) -> list[LaunchCase]:
    from ignition.kernels.paged_attention import triton as paged

    q = torch.zeros(40, 8, 128, dtype=dtype)
    cache = torch.zeros(10, 16, 2, 128, dtype=dtype)
    table = torch.zeros(4, 8, dtype=torch.int32)
    lengths = torch.zeros(5, dtype=torch.int32)
    kv = torch.zeros(40, 2, 128, dtype=dtype)
    return [
        (paged, "_packed_paged_attention_kernel",
         lambda: paged.packed_paged_attention(q, cache, cache, table, lengths, lengths[:4], 0.1)),
        (paged, "_write_paged_kv_kernel",
         lambda: paged.write_paged_kv(kv, kv, cache, cache, lengths)),
    ]  # fmt: skip


def _conv_cases(dtype: torch.dtype) -> list[LaunchCase]:
    from ignition.kernels.causal_conv1d import triton as conv

    weight = torch.zeros(256, 4, dtype=dtype)
    length = torch.zeros(1, dtype=torch.int32)
    return [
        (conv, "_causal_conv1d_prefill_kernel",
         lambda: conv.causal_conv1d_prefill(
             torch.zeros(128, 256, dtype=dtype), weight, torch.zeros(256, dtype=dtype),
             torch.zeros(256, 3, dtype=dtype), length)),
        (conv, "_causal_conv1d_update_kernel",
         lambda: conv.causal_conv1d_update(
             torch.zeros(4, 6, 256, dtype=dtype), weight, None,
             torch.zeros(4, 256, 3, dtype=dtype))),
    ]  # fmt: skip


def _gdn_cases(dtype: torch.dtype, *, with_chunk: bool) -> list[LaunchCase]:
    from ignition.kernels.gated_delta_rule import triton_chunk, triton_recurrent

    def inputs(*leading: int):
        qk = torch.zeros(*leading, 4, 128, dtype=dtype)
        return qk, qk, torch.zeros(*leading, 4, 128, dtype=dtype), torch.zeros(*leading, 4)

    q, k, v, g = inputs(130)
    rq, rk, rv, rg = inputs(4, 6)
    cases = [
        (triton_recurrent, "_recurrent_gated_delta_rule_kernel",
         lambda: triton_recurrent.recurrent_gated_delta_rule(
             rq, rk, rv, rg, rg, torch.zeros(4, 4, 128, 128), 0.1)),
    ]  # fmt: skip
    if with_chunk:
        cases.append(
            (triton_chunk, "_chunk_gated_delta_rule_kernel",
             lambda: triton_chunk.chunk_gated_delta_rule(
                 q, k, v, g, g, torch.zeros(4, 128, 128), 0.1))
        )  # fmt: skip
    return cases


def _ones_cases() -> list[LaunchCase]:
    """Triton turns int arguments equal to 1 into constexprs: compile those variants too."""
    from ignition.kernels.causal_conv1d import triton as conv
    from ignition.kernels.gated_delta_rule import triton_recurrent
    from ignition.kernels.paged_attention import triton as paged

    dtype = torch.bfloat16
    q = torch.zeros(1, 8, 128, dtype=dtype)
    cache = torch.zeros(10, 16, 2, 128, dtype=dtype)
    table = torch.zeros(1, 8, dtype=torch.int32)
    lengths = torch.zeros(2, dtype=torch.int32)
    weight = torch.zeros(256, 4, dtype=dtype)
    qk = torch.zeros(1, 1, 4, 128, dtype=dtype)
    g = torch.zeros(1, 1, 4)
    return [
        (paged, "_packed_paged_attention_kernel",
         lambda: paged.packed_paged_attention(q, cache, cache, table, lengths, lengths[:1], 0.1)),
        (conv, "_causal_conv1d_prefill_kernel",
         lambda: conv.causal_conv1d_prefill(
             torch.zeros(1, 256, dtype=dtype), weight, None, torch.zeros(256, 3, dtype=dtype),
             lengths[:1])),
        (conv, "_causal_conv1d_update_kernel",
         lambda: conv.causal_conv1d_update(
             torch.zeros(1, 1, 256, dtype=dtype), weight, None,
             torch.zeros(1, 256, 3, dtype=dtype))),
        (triton_recurrent, "_recurrent_gated_delta_rule_kernel",
         lambda: triton_recurrent.recurrent_gated_delta_rule(
             qk, qk, qk, g, g, torch.zeros(1, 4, 128, 128), 0.1)),
    ]  # fmt: skip


def _speculative_cases(rows: int, depth: int, width: int) -> list[LaunchCase]:
    from ignition.kernels.rejection_verify import triton as verify
    from ignition.kernels.speculative_allocation import triton as allocation

    vocab = 4096
    tokens = torch.zeros(rows, depth, dtype=torch.int64)
    draft = torch.zeros(rows, depth, vocab)
    target = torch.zeros(rows, width, vocab)
    lengths = torch.zeros(rows, dtype=torch.int32)
    uniforms = torch.zeros(rows, width)
    noise = torch.zeros(rows, vocab)
    return [
        (allocation, "_allocate_speculative_prefixes_kernel",
         lambda: allocation.allocate_speculative_prefixes(
             torch.zeros(rows, depth), lengths, rows * width)),
        (verify, "_rejection_verify_kernel",
         lambda: verify.rejection_verify(
             tokens, draft, target, lengths, uniforms, noise, greedy=True)),
        (verify, "_rejection_verify_kernel",
         lambda: verify.rejection_verify(
             tokens, draft, target, lengths, uniforms, noise, greedy=False)),
    ]  # fmt: skip


def launch_cases() -> list[LaunchCase]:
    """Every kernel in every activation dtype, except the chunked GDN kernel (about 10 s of
    compilation each) which is compiled for bf16, the serving dtype, only."""
    cases: list[LaunchCase] = []
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        with_chunk = dtype == torch.bfloat16
        cases += _paged_cases(dtype) + _conv_cases(dtype) + _gdn_cases(dtype, with_chunk=with_chunk)
    cases += _ones_cases()
    for rows, depth, width in ((8, 5, 6), (1, 1, 2), (4, 0, 1)):
        cases += _speculative_cases(rows, depth, width)
    from kernel_qsa_launch_cases import qsa_launch_cases

    return cases + qsa_launch_cases()
