"""QSA block scoring reference on CPU at ``vs_transformers.py``'s qwen4_exp shapes: the
reference (a prompt lane's queries read their row's keys once) against a per-query gather of
every block key (the reference before issue 39's change), process time, one thread.

    PYTHONPATH=. .venv/bin/python benchmarks/cpu_qsa_block_scores.py [--dtype bfloat16]
        [--lanes 4] [--tokens 128] [--repeats 5]

Prints the fastest of ``--repeats`` calls of each and whether their scores are bitwise
equal. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import time

import torch

from ignition.kernels.qsa_block_scores.reference import qsa_block_scores

HEADS, HEAD_DIM, PAGES, BLOCKS_PER_PAGE, RATIO = 8, 64, 65, 16, 4  # the benchmark's qwen4_exp


def per_query_gather(q, block_keys, page_table, token_row, num_complete) -> torch.Tensor:
    """Every query gathers and upcasts all of its row's block keys (the old reference)."""
    pages = page_table.long().clamp(0, block_keys.shape[0] - 1)
    keys = block_keys[pages[token_row]].flatten(1, 2)  # [T, max_blocks, d]
    scores = torch.einsum("thd,tbd->thb", q.float(), keys.float())
    scores = scores.relu().sum(dim=1) / q.shape[-1] ** 0.5
    block = torch.arange(scores.shape[1])
    return scores.masked_fill(block[None, :] >= num_complete[:, None], float("-inf"))


def fastest(call, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        began = time.process_time()
        call()
        best = min(best, time.process_time() - began)
    return best * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="bfloat16")
    parser.add_argument("--lanes", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    dtype = getattr(torch, args.dtype)
    gen = torch.Generator().manual_seed(0)
    num_pages = args.lanes * PAGES + 1
    table = torch.randperm(num_pages, generator=gen)[: args.lanes * PAGES]
    table = table.view(args.lanes, PAGES).to(torch.int32)
    token_row = torch.arange(args.lanes).repeat_interleave(args.tokens)
    positions = torch.arange(args.tokens).repeat(args.lanes)
    q = torch.randn(token_row.shape[0], HEADS, HEAD_DIM, generator=gen).to(dtype)
    keys = torch.randn(num_pages, BLOCKS_PER_PAGE, HEAD_DIM, generator=gen).to(dtype)
    inputs = (q, keys, table, token_row, (positions + 1) // RATIO)
    same = torch.equal(qsa_block_scores(*inputs), per_query_gather(*inputs))
    old = fastest(lambda: per_query_gather(*inputs), args.repeats)
    new = fastest(lambda: qsa_block_scores(*inputs), args.repeats)
    print(f"{args.lanes} x {args.tokens} queries, {args.dtype}: per-query gather {old:.1f} ms, "
          f"reference {new:.1f} ms ({old / new:.1f}x); bitwise equal: {same}")  # fmt: skip


if __name__ == "__main__":
    main()
