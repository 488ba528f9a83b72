"""The slot-row gathers of one CPU decode step: ``index_select`` vs advanced indexing.

Each decode step gathers, per GDN layer, the slot's recurrent state and conv window (in the
forward) and the committed position's state and window (in ``commit``), and per attention
layer the slot's KV pages (the reference attention). The forward does them through
``index_select`` (``packing.take_rows``, ``take_positions``); the peer is advanced indexing
(``x[rows]``), what it did before. Both copy the same bits (tests/model/test_row_takes.py).
Shapes are those of ``benchmarks/vs_transformers.py``'s random Qwen3.5 served at
concurrency 4 (6 GDN and 2 attention layers; 8 value heads of 64 by 64; conv channels 1024,
kernel 4; 261 KV pages of 64 tokens, 2 KV heads of 64; a 192-token context).

    .venv/bin/python benchmarks/cpu_row_gathers.py [--batch 1] [--repeats 7]

Prints microseconds per decode step for each (the fastest of ``--repeats`` timings of 200
steps' gathers) and the ratio. A whole decode step takes about 30 ms on one thread
(``benchmarks/cpu_step_profile.py``), too noisy on a shared machine to show a 1 ms change
end to end; the gathers alone are not.
"""

from __future__ import annotations

import argparse
import time

import torch

GDN_LAYERS, ATTENTION_LAYERS = 6, 2
SLOTS, HEADS, KEY_DIM, VALUE_DIM, CHANNELS, KERNEL = 4, 8, 64, 64, 1024, 4
PAGES, PAGE_SIZE, KV_HEADS, HEAD_DIM, CONTEXT_PAGES = 261, 64, 2, 64, 3


def step_gathers(batch: int, indexing: bool):
    """A callable doing one decode step's gathers, the old way (``indexing``) or the new."""
    from ignition.model.packing import take_positions, take_rows

    state = torch.randn(SLOTS + 1, HEADS, KEY_DIM, VALUE_DIM)
    window = torch.randn(SLOTS + 1, CHANNELS, KERNEL - 1)
    states = torch.randn(batch, 1, HEADS, KEY_DIM, VALUE_DIM)  # after each decode position
    windows = torch.randn(batch, 1, CHANNELS, KERNEL - 1)
    cache = torch.randn(PAGES, PAGE_SIZE, KV_HEADS, HEAD_DIM)
    rows, positions = torch.arange(batch), torch.zeros(batch, dtype=torch.long)
    pages = torch.arange(batch * CONTEXT_PAGES).view(batch, CONTEXT_PAGES)

    def old() -> None:
        for _ in range(GDN_LAYERS):
            state[rows], window[rows], state[rows[:1]], window[rows[:1]]
            states[rows, positions], windows[rows, positions]
        for _ in range(2 * ATTENTION_LAYERS):  # keys and values
            cache[pages].flatten(1, 2)

    def new() -> None:
        for _ in range(GDN_LAYERS):
            take_rows(state, rows), take_rows(window, rows)
            take_rows(state, rows[:1]), take_rows(window, rows[:1])
            take_positions(states, rows, positions), take_positions(windows, rows, positions)
        for _ in range(2 * ATTENTION_LAYERS):
            cache.index_select(0, pages.reshape(-1)).view(batch, -1, KV_HEADS, HEAD_DIM)

    return old if indexing else new


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    best = {"index_select": float("inf"), "advanced indexing": float("inf")}
    runs = {name: step_gathers(args.batch, name == "advanced indexing") for name in best}
    for _ in range(args.repeats):
        for name, run in runs.items():  # taking turns: the machine's load falls on both
            began = time.perf_counter()
            for _ in range(args.steps):
                run()
            best[name] = min(best[name], (time.perf_counter() - began) / args.steps)
    ours, peer = best["index_select"], best["advanced indexing"]
    print(f"one thread, batch {args.batch}: a decode step's slot-row gathers")
    print(f"index_select:      {ours * 1e6:8.1f} us per step")
    print(f"advanced indexing: {peer * 1e6:8.1f} us per step")
    print(f"ratio (advanced indexing / index_select): {peer / ours:.2f}x")


if __name__ == "__main__":
    main()
