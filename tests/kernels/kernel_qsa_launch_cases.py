"""QSA's Triton kernels for the CUDA compile check, at the released shapes (24 query heads,
2 KV heads of 256; an indexer of 32 heads of 128, blocks of 4, rotary 64 of 128)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

import torch

LaunchCase = tuple[Any, str, Callable[[], Any]]
FP8 = torch.float8_e4m3fn


@contextmanager
def _skipped(module, kernel_name: str):
    """A second kernel of the same launcher records nothing and does not run."""
    kernel = getattr(module, kernel_name)

    class _Skip:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: None

    setattr(module, kernel_name, _Skip())
    try:
        yield
    finally:
        setattr(module, kernel_name, kernel)


def _score_cases(dtype: torch.dtype, key_dtype: torch.dtype) -> list[LaunchCase]:
    from ignition.kernels.qsa_block_scores import triton as scores

    table = torch.zeros(2, 64, dtype=torch.int32)
    keys = torch.zeros(128, 16, 128, dtype=key_dtype)
    q = torch.zeros(40, 32, 128, dtype=dtype)
    rows, complete = torch.zeros(40, dtype=torch.int64), torch.zeros(40, dtype=torch.int64)
    out = torch.zeros(40, 1024)
    return [
        (scores, "_block_scores_kernel",
         lambda: scores.launch_qsa_block_scores(q, keys, table, rows, complete, out, False)),
        (scores, "_block_scores_tile_kernel",
         lambda: scores.launch_qsa_block_scores(q, keys, table, rows, complete, out, True)),
    ]  # fmt: skip


def _attention_cases(dtype: torch.dtype) -> list[LaunchCase]:
    from ignition.kernels.qsa_sparse_attention import triton as sparse

    q, out = torch.zeros(8, 24, 256, dtype=dtype), torch.zeros(8, 24, 256, dtype=dtype)
    cache = torch.zeros(16, 64, 2, 256, dtype=dtype)
    table = torch.zeros(2, 8, dtype=torch.int32)
    rows, selected = torch.zeros(8, dtype=torch.int64), torch.zeros(8, 2051, dtype=torch.int64)
    args = (q, cache, cache, table, rows, selected, 0.06, out)

    def split(kernel_skipped: str) -> Callable[[], Any]:
        def call() -> None:
            with _skipped(sparse, kernel_skipped):
                sparse.launch_qsa_sparse_attention(*args, num_splits=8)

        return call

    return [
        (sparse, "_sparse_attention_kernel",
         lambda: sparse.launch_qsa_sparse_attention(*args, num_splits=1)),
        (sparse, "_sparse_attention_kernel", split("_combine_kernel")),
        (sparse, "_combine_kernel", split("_sparse_attention_kernel")),
    ]  # fmt: skip


def _compress_cases(dtype: torch.dtype, key_dtype: torch.dtype) -> list[LaunchCase]:
    from ignition.kernels.qsa_block_compress import triton as compress

    raw, ring = torch.zeros(40, 128, dtype=dtype), torch.zeros(5, 4, 128, dtype=dtype)
    source = torch.zeros(40, 4, dtype=torch.int32)
    index = torch.zeros(40, 4, dtype=torch.int64)
    cos = torch.zeros(40, 32)
    slots = torch.zeros(40, dtype=torch.int32)
    keys = torch.zeros(16, 16, 128, dtype=key_dtype)
    scale = torch.zeros(128)
    rows = torch.zeros(40, dtype=torch.int64)
    return [
        (compress, "_compress_kernel",
         lambda: compress.compress_block_keys(
             raw, ring, ring, source, index, cos, cos, scale, 1e-6, slots, keys)),
        (compress, "_write_pending_kernel",
         lambda: compress.write_pending_keys(raw, ring, rows, rows)),
    ]  # fmt: skip


def _topk_cases() -> list[LaunchCase]:
    from ignition.kernels.block_topk import triton as topk

    scores, visible = torch.zeros(8, 32768), torch.zeros(8, dtype=torch.int64)
    out = torch.zeros(8, 512, dtype=torch.int64)
    return [(topk, "_block_topk_kernel", lambda: topk.launch_block_topk(scores, visible, 512, out))]


def qsa_launch_cases() -> list[LaunchCase]:
    cases: list[LaunchCase] = _topk_cases()
    for dtype in (torch.bfloat16, torch.float32):
        cases += _score_cases(dtype, dtype) + _attention_cases(dtype)
        cases += _compress_cases(dtype, dtype)
    cases += _score_cases(torch.bfloat16, FP8) + _compress_cases(torch.bfloat16, FP8)
    return cases
