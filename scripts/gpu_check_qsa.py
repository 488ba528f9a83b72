"""The GPU check's QSA section (issue 27): the indexer and sparse attention at long context.

Rows, at the released attention shape (24 query heads, 2 KV heads of 256, bf16; an indexer
of ``INDEX_HEADS`` heads of ``INDEX_DIM``, an assumption until the published config is read;
budget 2048 tokens in blocks of 4; pages of 64 tokens):

- ``decode <context> x<batch>`` for contexts 8k / 32k / 128k and batches 1 / 32, and
  ``prefill 2048 @ <context>`` (one prompt chunk of 2048 tokens ending at the context): the
  whole QSA read path (block scores, top-k, selected positions, sparse attention) on the
  Triton kernels and on the PyTorch references, beside dense paged attention over the same
  KV (Triton), in milliseconds, with the Triton path's share of the 4.3 TB/s HBM roofline
  from its traffic floor (the visible block keys, the selected keys and values: decode reads
  each query's selection, prefill the row's context once). A row passes when the Triton
  scores and attention (over the reference selection) match the references.
- ``fp8 index keys``: scores of e4m3 block keys on Triton = the reference (the interpreter
  has no fp8, so this runs only here), and their error against bf16 keys.
- ``block-key compression`` and ``decode captured``: ``scripts/gpu_check_qsa_kernels.py``.

The dry run (CPU, CI) runs the same code at tiny sizes on the references, with the host-sync
detector in place of the capture.

Not yet run on a GPU (no device was lent when these rows were written): every row above at
full size, so the kernels' speed, their tile sizes (``BLOCK_B``, ``BLOCK_T``, ``BLOCK_S``, the
decode split target) and the FP8 Triton paths are unmeasured; under the interpreter they are
checked for results only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from ignition.kernels import ops, use_backend
from ignition.model.layers.qsa_indexer import selected_positions

HBM_BYTES_PER_S = 4.3e12
ERROR_LIMIT = 5e-2
INDEX_HEADS, INDEX_DIM = 32, 128


@dataclass(frozen=True)
class Shape:
    heads: int
    kv_heads: int
    head_dim: int
    index_heads: int
    index_dim: int
    budget: int
    ratio: int
    page_size: int
    contexts: tuple[int, ...]
    batches: tuple[int, ...]
    chunk: int
    dtype: torch.dtype

    @property
    def num_blocks(self) -> int:
        return self.budget // self.ratio


FULL = Shape(
    24,
    2,
    256,
    INDEX_HEADS,
    INDEX_DIM,
    2048,
    4,
    64,
    (8192, 32768, 131072),
    (1, 32),
    2048,
    torch.bfloat16,
)
TINY = Shape(4, 2, 32, 2, 16, 16, 4, 16, (64, 160), (1, 2), 24, torch.float32)


@dataclass
class Paged:
    """One set of caches for the largest context and batch; smaller cases use a prefix."""

    k_cache: torch.Tensor
    v_cache: torch.Tensor
    block_keys: torch.Tensor
    page_table: torch.Tensor


def make_paged(shape: Shape, device: torch.device) -> Paged:
    rows, pages = max(shape.batches), max(shape.contexts) // shape.page_size
    gen = torch.Generator(device=device).manual_seed(0)
    kv = (rows * pages, shape.page_size, shape.kv_heads, shape.head_dim)
    keys = (rows * pages, shape.page_size // shape.ratio, shape.index_dim)

    def randn(*size: int) -> torch.Tensor:
        return torch.randn(*size, generator=gen, device=device, dtype=shape.dtype)

    order = torch.randperm(rows * pages, generator=gen, device=device).to(torch.int32)
    return Paged(randn(*kv), randn(*kv), randn(*keys), order.view(rows, pages))


@dataclass
class Frame:
    q: torch.Tensor  # [T, H, Dh]
    index_q: torch.Tensor  # [T, Hi, d]
    page_table: torch.Tensor  # [R, pages]
    token_row: torch.Tensor
    positions: torch.Tensor
    cu_query_lens: torch.Tensor
    context_lens: torch.Tensor


def make_frame(shape: Shape, paged: Paged, rows: int, query_len: int, context: int) -> Frame:
    device = paged.k_cache.device
    gen = torch.Generator(device=device).manual_seed(1)
    num_tokens = rows * query_len
    token_row = torch.arange(rows, device=device).repeat_interleave(query_len)
    offset = torch.arange(query_len, device=device).repeat(rows)
    return Frame(
        q=torch.randn(num_tokens, shape.heads, shape.head_dim, generator=gen, device=device).to(
            shape.dtype
        ),
        index_q=torch.randn(
            num_tokens, shape.index_heads, shape.index_dim, generator=gen, device=device
        ).to(shape.dtype),
        page_table=paged.page_table[:rows, : context // shape.page_size],
        token_row=token_row,
        positions=context - query_len + offset,
        cu_query_lens=torch.arange(rows + 1, device=device, dtype=torch.int32) * query_len,
        context_lens=torch.full((rows,), context, device=device, dtype=torch.int32),
    )


def _select(shape: Shape, paged: Paged, f: Frame) -> torch.Tensor:
    num_complete = (f.positions + 1) // shape.ratio
    scores = ops.qsa_block_scores(
        f.index_q, paged.block_keys, f.page_table, f.token_row, num_complete
    )
    keep = min(shape.num_blocks, scores.shape[1])
    chosen = ops.block_topk(scores, num_complete, keep)
    return selected_positions(chosen, num_complete, f.positions, shape.ratio, shape.num_blocks)


def qsa_path(shape: Shape, paged: Paged, f: Frame) -> torch.Tensor:
    selected = _select(shape, paged, f)
    return ops.qsa_sparse_attention(
        f.q, paged.k_cache, paged.v_cache, f.page_table, f.token_row, selected, shape.head_dim**-0.5
    )


def _dense(shape: Shape, paged: Paged, f: Frame) -> torch.Tensor:
    return ops.packed_paged_attention(
        f.q,
        paged.k_cache,
        paged.v_cache,
        f.page_table,
        f.cu_query_lens,
        f.context_lens,
        shape.head_dim**-0.5,
    )


def _floor_bytes(shape: Shape, rows: int, query_len: int, context: int) -> int:
    """The QSA read path's traffic floor: visible block keys and selected KV per row."""
    element = torch.finfo(shape.dtype).bits // 8
    blocks = context // shape.ratio * shape.index_dim
    selected = min(context, query_len * (shape.budget + shape.ratio - 1))
    kv = selected * shape.kv_heads * shape.head_dim * 2
    queries = query_len * (shape.heads * shape.head_dim * 2 + shape.index_heads * shape.index_dim)
    return rows * (blocks + kv + queries) * element


def _errors(shape: Shape, paged: Paged, f: Frame, backend: str) -> tuple[float, float]:
    """(max |score error|, max |attention error|) of ``backend`` against the references, the
    attention over the reference selection (top-k ties may cut differently)."""
    num_complete = (f.positions + 1) // shape.ratio
    args = (f.index_q, paged.block_keys, f.page_table, f.token_row, num_complete)
    with use_backend("reference"):
        want_scores = ops.qsa_block_scores(*args)
        selected = _select(shape, paged, f)
        kv = (f.q, paged.k_cache, paged.v_cache, f.page_table, f.token_row, selected)
        want = ops.qsa_sparse_attention(*kv, shape.head_dim**-0.5)
    with use_backend(backend):
        got_scores = ops.qsa_block_scores(*args)
        got = ops.qsa_sparse_attention(*kv, shape.head_dim**-0.5)
    visible = torch.isfinite(want_scores)
    score_error = (got_scores[visible] - want_scores[visible]).abs().max().item()
    return score_error, (got.float() - want.float()).abs().max().item()


def check_qsa(s, row: Callable[..., object], median_ms: Callable[..., float]) -> list:
    """``s``: the check's Setup; ``row(section, check, ok, detail)``; ``median_ms(call,
    device, repeats)``."""
    shape = TINY if s.dry_run else FULL
    backend = "reference" if s.dry_run else "triton"
    paged = make_paged(shape, s.device)
    cases = [(f"decode {_label(c)} x{b}", b, 1, c) for c in shape.contexts for b in shape.batches]
    cases += [(f"prefill {shape.chunk} @ {_label(c)}", 1, shape.chunk, c) for c in shape.contexts]
    rows = []
    with torch.inference_mode():
        for name, batch, query_len, context in cases:
            f = make_frame(shape, paged, batch, query_len, context)
            score_error, attention_error = _errors(shape, paged, f, backend)
            repeats = 1 if s.dry_run or query_len > 1 else 3
            with use_backend(backend):
                ms = median_ms(lambda f=f: qsa_path(shape, paged, f), s.device, repeats)
                dense_ms = median_ms(lambda f=f: _dense(shape, paged, f), s.device, repeats)
                stages = _stage_ms(
                    shape, paged, f, partial(median_ms, device=s.device, repeats=repeats)
                )
            with use_backend("reference"):
                reference_ms = median_ms(lambda f=f: qsa_path(shape, paged, f), s.device, 1)
            share = _floor_bytes(shape, batch, query_len, context) / (ms / 1e3) / HBM_BYTES_PER_S
            detail = (
                f"qsa {ms:.3f} ms ({share * 100:.1f}% of 4.3 TB/s), reference "
                f"{reference_ms:.2f} ms ({reference_ms / ms:.1f}x), dense {dense_ms:.3f} "
                f"ms ({dense_ms / ms:.2f}x); err scores {score_error:.1e} "
                f"attention {attention_error:.1e}; stages: {stages}"
            )
            ok = score_error <= ERROR_LIMIT and attention_error <= ERROR_LIMIT
            rows.append(row("qsa", name, ok, detail))
            del f
    rows.append(_check_fp8(s, row, shape, paged))
    return rows


def _stage_ms(shape: Shape, paged: Paged, f: Frame, timed: Callable[..., float]) -> str:
    """Where the QSA path's time goes: scoring, top-k, sparse attention (milliseconds)."""
    num_complete = (f.positions + 1) // shape.ratio
    args = (f.index_q, paged.block_keys, f.page_table, f.token_row, num_complete)
    scores = ops.qsa_block_scores(*args)
    keep = min(shape.num_blocks, scores.shape[1])
    selected = _select(shape, paged, f)
    kv = (f.q, paged.k_cache, paged.v_cache, f.page_table, f.token_row, selected)
    score_ms = timed(lambda: ops.qsa_block_scores(*args))
    topk_ms = timed(lambda: ops.block_topk(scores, num_complete, keep))
    attention_ms = timed(lambda: ops.qsa_sparse_attention(*kv, shape.head_dim**-0.5))
    return f"scores {score_ms:.3f} ms, top-k {topk_ms:.3f} ms, attention {attention_ms:.3f} ms"


def _label(context: int) -> str:
    return f"{context // 1024}k" if context >= 1024 else str(context)


def _check_fp8(s, row, shape: Shape, paged: Paged):
    """e4m3 block keys: Triton scores = reference scores (GPU only), error against bf16."""
    f = make_frame(shape, paged, 1, 1, shape.contexts[0])
    num_complete = (f.positions + 1) // shape.ratio
    keys8 = paged.block_keys.to(torch.float8_e4m3fn)
    args = (f.index_q, keys8, f.page_table, f.token_row, num_complete)
    with torch.inference_mode(), use_backend("reference"):
        want = ops.qsa_block_scores(*args)
        exact = ops.qsa_block_scores(f.index_q, paged.block_keys, *args[2:])
    with torch.inference_mode(), use_backend("reference" if s.dry_run else "triton"):
        got = ops.qsa_block_scores(*args)
    visible = torch.isfinite(want)
    error = (got[visible] - want[visible]).abs().max().item()
    drift = ((want[visible] - exact[visible]).norm() / exact[visible].norm()).item()
    detail = f"triton vs reference {error:.1e}; fp8 vs {shape.dtype} scores rel L2 {drift:.4f}"
    return row("qsa", "fp8 index keys", error <= ERROR_LIMIT, detail)
