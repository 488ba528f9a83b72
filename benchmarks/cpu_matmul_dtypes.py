"""One linear layer of vs_transformers.py's random Qwen3.5 (512 -> 2048, an MLP projection)
in fp32 and bf16 on this CPU, at the row counts a step multiplies: 1 and 4 decode rows, one
128-token prompt chunk, four 128-token prompts padded into one batch (a benchmark).

Why bf16 helps a prompt chunk and a 4-row decode step but not a 1-row one: it prints the
time per call, the weight bytes read per second and the arithmetic rate of each.

    PYTHONPATH=. .venv/bin/python benchmarks/cpu_matmul_dtypes.py [--threads 1]
"""

from __future__ import annotations

import argparse
import time

import torch


def seconds_per_call(x: torch.Tensor, weight: torch.Tensor, calls: int) -> float:
    for _ in range(10):
        torch.nn.functional.linear(x, weight)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            torch.nn.functional.linear(x, weight)
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
            s = seconds_per_call(x, weight, 200 if rows < 100 else 20)
            nbytes = weight.numel() * weight.element_size()
            flops = 2 * rows * weight.numel()
            name = str(dtype).removeprefix("torch.")
            rates = f"{nbytes / s / 1e9:.1f} | {flops / s / 1e9:.0f}"
            print(f"| {rows} | {name} | {s * 1e6:.0f} | {rates} |")


if __name__ == "__main__":
    main()
