"""The GPU check's QSA section, second part: the block-key compression kernel against its
reference; the Triton top-k candidate (``launch_block_topk``) against the sort the op runs
(same kept sets, milliseconds of each at 128k context for 32 decode rows and a 2048-token
chunk; the dry run times the sort only: the interpreter is not on in that process); and the
Triton QSA decode path captured in a CUDA graph and replayed under
``torch.cuda.set_sync_debug_mode("error")`` (the dry run: the host-sync detector on CPU).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ignition.kernels import ops, use_backend
from scripts.gpu_check_qsa import ERROR_LIMIT, FULL, TINY, Shape, make_frame, make_paged, qsa_path


def check_qsa_kernels(s, row: Callable[..., object], median_ms: Callable[..., float]) -> list:
    """``s``: the check's Setup; ``row(section, check, ok, detail)``; ``median_ms(call,
    device, repeats)``."""
    shape = TINY if s.dry_run else FULL
    backend = "reference" if s.dry_run else "triton"
    topk = [_check_topk(s, row, shape, median_ms, n) for n in (max(shape.batches), shape.chunk)]
    return [_check_compress(s, row, shape, backend), *topk, _check_capture(s, row, shape, backend)]


def _check_topk(s, row, shape: Shape, median_ms: Callable[..., float], num_queries: int):
    from ignition.kernels.block_topk import triton as topk

    num_blocks, keep = max(shape.contexts) // shape.ratio, shape.num_blocks
    gen = torch.Generator(device=s.device).manual_seed(3)
    scores = torch.rand(num_queries, num_blocks, generator=gen, device=s.device)
    scores = torch.where(scores > 0.7, scores, 0.0)  # relu sums: many exact zeros
    visible = torch.full((num_queries,), num_blocks, device=s.device)
    sort_ms = median_ms(lambda: topk.block_topk(scores, visible, keep), s.device, 3)
    name = f"top-k {num_queries} x {num_blocks} blocks"
    if s.dry_run:
        return row("qsa", name, True, f"sort {sort_ms:.3f} ms (kernel: GPU only)")
    out = torch.empty(num_queries, keep, dtype=torch.int64, device=s.device)
    kernel_ms = median_ms(lambda: topk.launch_block_topk(scores, visible, keep, out), s.device, 3)
    same = torch.equal(
        out.sort(dim=1).values, topk.block_topk(scores, visible, keep).sort(dim=1).values
    )
    detail = f"sort {sort_ms:.3f} ms, kernel {kernel_ms:.3f} ms ({sort_ms / kernel_ms:.2f}x)"
    return row("qsa", name, same, f"{detail}; same sets {same}")


def _check_compress(s, row, shape: Shape, backend: str):
    gen = torch.Generator(device=s.device).manual_seed(2)
    num_tokens, slots, d, ratio = 64, 33, shape.index_dim, shape.ratio

    def randn(*size: int) -> torch.Tensor:
        return torch.randn(*size, generator=gen, device=s.device).to(shape.dtype)

    raw, ring, draft = randn(num_tokens, d), randn(slots, ratio, d), randn(slots, ratio, d)
    source = torch.randint(0, 3, (num_tokens, ratio), generator=gen, device=s.device)
    index = torch.randint(0, num_tokens, (num_tokens, ratio), generator=gen, device=s.device)
    angles = torch.rand(num_tokens, d // 4, generator=gen, device=s.device) * 6
    scale = torch.rand(d, generator=gen, device=s.device) + 0.5
    written = torch.randperm(num_tokens, generator=gen, device=s.device).to(torch.int32)
    slot = torch.where(torch.arange(num_tokens, device=s.device) % ratio == 0, written, -1)
    args = (
        raw,
        ring,
        draft,
        source.to(torch.int32),
        index,
        angles.cos(),
        angles.sin(),
        scale,
        1e-6,
        slot.to(torch.int32),
    )
    want = torch.zeros(num_tokens, 2, d, device=s.device, dtype=shape.dtype)
    got = want.clone()
    with torch.inference_mode():
        with use_backend("reference"):
            ops.compress_block_keys(*args, want)
        with use_backend(backend):
            ops.compress_block_keys(*args, got)
    error = (got.float() - want.float()).abs().max().item()
    return row("qsa", "block-key compression", error <= ERROR_LIMIT, f"err {error:.1e}")


def _check_capture(s, row, shape: Shape, backend: str):
    from ignition.compiler.host_sync import HostSyncDetector

    paged = make_paged(shape, s.device)
    f = make_frame(shape, paged, max(shape.batches), 1, shape.contexts[1])
    with torch.inference_mode(), use_backend(backend):
        eager = qsa_path(shape, paged, f)
        if s.device.type != "cuda":
            with HostSyncDetector("qsa decode"):
                replayed = qsa_path(shape, paged, f)
            how = "host-sync detector (CPU)"
        else:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                qsa_path(shape, paged, f)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                captured = qsa_path(shape, paged, f)
            torch.cuda.set_sync_debug_mode("error")
            try:
                graph.replay()
            finally:
                torch.cuda.set_sync_debug_mode("default")
            torch.cuda.synchronize()
            replayed = captured
            how = "CUDA graph replay under sync debug mode"
    error = (replayed.float() - eager.float()).abs().max().item()
    return row("qsa", "decode captured", error <= ERROR_LIMIT, f"{how}; err {error:.1e}")
