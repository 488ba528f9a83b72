"""Cost of the device sampling stage with and without logits processing (a benchmark).

Times, per call, what a program's epilogue does for R rows over a V-token vocabulary:
sampling alone (temperature / top-p and the exponential race), then with the logits
processing of issue 15 (penalties, bias, min_tokens from the per-slot history) and the
raw logprobs (log-softmax, top 20). Every program always runs the processing (fixed
shapes: a captured graph cannot branch on whether a row asked for it), so the difference
is what it costs every frame. On CPU the sampler skips the paths no row takes; the last
column times every path over every row, as a GPU's fixed-shape program runs it (and as the
CPU did before issue 15's fix, less the in-place noise hash).

    .venv/bin/python benchmarks/sampling_stage.py [--vocab 151936] [--rows 1 8 32]
        [--repeats 20] [--top-p 1.0] [--no-penalties] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import time

import torch

from ignition.model import sampling
from ignition.model.logits_processing import SlotHistory, token_logprobs
from ignition.model.sampling import SamplingTensors, sample


def _ms(work, repeats: int) -> float:
    work()
    start = time.perf_counter()
    for _ in range(repeats):
        work()
    return (time.perf_counter() - start) / repeats * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=151936)
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument(
        "--no-penalties", action="store_true", help="process with neutral penalties (no row asks)"
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    print(f"vocab {args.vocab}, {device}, {torch.get_num_threads()} torch threads")
    for rows in args.rows:
        plain, processed = _timed(rows, args, device, sync)
        sampling.SKIP_UNUSED_PATHS = False
        every_path, _ = _timed(rows, args, device, sync)
        sampling.SKIP_UNUSED_PATHS = True
        print(
            f"rows {rows:3d}: sampling {plain:8.3f} ms, "
            f"with processing + logprobs {processed:8.3f} ms, "
            f"sampling running every path {every_path:8.3f} ms"
        )


def _timed(rows: int, args, device: torch.device, sync) -> tuple[float, float]:
    """Milliseconds per call: sampling alone, and with processing + logprobs + counting."""
    history = SlotHistory.allocate(rows, args.vocab, device)
    logits = torch.randn(rows, args.vocab, device=device)
    params = SamplingTensors.build(
        [0.8] * rows,
        top_p=[args.top_p] * rows,
        seed=list(range(rows)),
        device=device,
        repetition_penalty=[1.0 if args.no_penalties else 1.1] * rows,
        frequency_penalty=[0.0 if args.no_penalties else 0.5] * rows,
    )
    slots = torch.arange(rows, device=device, dtype=torch.int32)
    positions = torch.full((rows,), 10, device=device)

    def plain() -> None:
        sample(logits, params, positions)
        sync()

    def processed() -> None:
        tokens = sample(history.process(logits, history.rows(slots), params), params, positions)
        token_logprobs(logits, tokens)
        history.record(slots, tokens[:, None])
        sync()

    return _ms(plain, args.repeats), _ms(processed, args.repeats)


if __name__ == "__main__":
    with torch.inference_mode():
        main()
