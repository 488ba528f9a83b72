"""One linear layer of vs_transformers.py's random Qwen3.5 (512 -> 2048, an MLP projection)
in fp32 and bf16 on this CPU, at the row counts a step multiplies: 1 and 4 decode rows, one
128-token prompt chunk, four 128-token prompts padded into one batch (a benchmark).

Why bf16 helps a prompt chunk and a 4-row decode step but not a 1-row one: it prints the
time per call, the weight bytes read per second and the arithmetic rate of each; then one
row through ``linear`` and through ``torch.mv`` for the model's projection shapes.

    PYTHONPATH=. .venv/bin/python benchmarks/cpu_matmul_dtypes.py [--threads 1]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F


def seconds_per_call(run: Callable[[], object], calls: int) -> float:
    for _ in range(10):
        run()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            run()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"linear 512 -> 2048, CPU, {torch.get_num_threads()} thread(s), fastest of 3")
    print("| rows | dtype | us per call | weight GB/s | GFLOP/s |\n|---:|---|---:|---:|---:|")
    for rows in (1, 4, 128, 512):
        for dtype in (torch.float32, torch.bfloat16):
            x = torch.randn(rows, 512, dtype=dtype)
            weight = torch.randn(2048, 512, dtype=dtype)
            s = seconds_per_call(partial(F.linear, x, weight), 200 if rows < 100 else 20)
            nbytes = weight.numel() * weight.element_size()
            flops = 2 * rows * weight.numel()
            name = str(dtype).removeprefix("torch.")
            rates = f"{nbytes / s / 1e9:.1f} | {flops / s / 1e9:.0f}"
            print(f"| {rows} | {name} | {s * 1e6:.0f} | {rates} |")
    print("\none row: linear against torch.mv (model/row_products.py), us per call")
    print("| weight | bf16 linear | bf16 mv | fp32 linear | fp32 mv |\n|---|---:|---:|---:|---:|")
    for out_features, in_features in ((2048, 512), (512, 2048), (1024, 512), (32000, 512)):
        cells = []
        for dtype in (torch.bfloat16, torch.float32):
            x = torch.randn(1, in_features, dtype=dtype)
            weight = torch.randn(out_features, in_features, dtype=dtype)
            calls = 50 if out_features > 10000 else 200
            cells.append(seconds_per_call(partial(F.linear, x, weight), calls))
            cells.append(seconds_per_call(partial(torch.mv, weight, x[0]), calls))
        row = " | ".join(f"{c * 1e6:.0f}" for c in cells)
        print(f"| {out_features} x {in_features} | {row} |")


if __name__ == "__main__":
    main()
