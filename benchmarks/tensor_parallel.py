"""One rank against two: greedy output equality and per-step times through the engine.

Run: python benchmarks/tensor_parallel.py [--artifacts DIR] [--device cpu|cuda]
        [--speculation off|fixed|adaptive] [--requests 3] [--max-tokens 32]

Without --artifacts it builds the embedded checkpoint (two request slots, 64-token prefill
chunks) into a temporary folder. It runs the same greedy requests, all submitted at once,
through one rank and through two (spawned; gloo on CPU, NCCL on CUDA, which needs two
visible GPUs), then prints whether every request's tokens are identical and, per program
kind, the median device and wall milliseconds per frame (two ranks: rank zero's cost sample,
the maximum of the ranks' intervals). Helios picks programs from measured costs, so the two
runs may split their frames differently between kinds (both counts are printed). On a CPU
the two ranks share its cores and pay gloo's host collectives: the two-rank columns measure
overhead, not speed-up.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from ignition.distributed.launch import run_tensor_parallel
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from ignition.serving.engine import ServeOptions, open_engine


def run(options: ServeOptions, tp, num_requests: int, max_tokens: int) -> dict:
    _bundle, engine = open_engine(options, tp=tp)
    steps: dict[str, list[tuple[float, float]]] = defaultdict(list)

    def on_frame(plan, result) -> None:
        timing = result.timing
        steps[plan.descriptor.kind.value].append((timing.device_ns / 1e6, timing.wall_ns / 1e6))

    engine.frame_listeners.append(on_frame)
    tokens: dict[int, list[int]] = defaultdict(list)
    sampling = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    for i in range(num_requests):
        prompt = tuple(range(10 + 7 * i, 18 + 9 * i))
        sink = lambda chunk, i=i: tokens[i].extend(chunk.token_ids)  # noqa: E731
        engine.submit(GenerationRequest(f"bench-{i}", prompt, sampling), sink)
    engine.run_until_idle()
    return {"tokens": dict(tokens), "steps": dict(steps)}


def build(out: Path, device: str) -> None:
    args = ["build", "--out", str(out), "--max-prefill-chunk", "64", "--concurrency", "2"]
    command = [sys.executable, "-m", "ignition.cli", *args, "--mixed-prefill", "--device", device]
    subprocess.run(command, check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifacts", type=Path)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--speculation", default="adaptive")
    parser.add_argument("--requests", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        artifacts = args.artifacts
        if artifacts is None:
            artifacts = Path(tmp) / "bundle"
            build(artifacts, args.device)
        options = ServeOptions(
            artifacts=str(artifacts), speculation=args.speculation, device=args.device
        )
        one = run(options, None, args.requests, args.max_tokens)
        two = run_tensor_parallel(
            2, options, lambda o, tp: run(o, tp, args.requests, args.max_tokens)
        )
    same = one["tokens"] == two["tokens"]
    num_tokens = sum(len(t) for t in one["tokens"].values())
    print(f"speculation {args.speculation}, {args.requests} requests x {args.max_tokens} tokens")
    print(f"greedy tokens identical, one rank vs two: {same} ({num_tokens} tokens)")
    print(
        f"{'kind':<20}{'frames 1/2':>12}{'1 rank dev ms':>15}{'2 ranks dev ms':>16}"
        f"{'1 rank wall ms':>16}{'2 ranks wall ms':>17}"
    )
    for kind in sorted(set(one["steps"]) | set(two["steps"])):
        a, b = one["steps"].get(kind, []), two["steps"].get(kind, [])

        def med(rows, col):
            return f"{statistics.median(r[col] for r in rows):.2f}" if rows else "-"

        frames = f"{len(a)}/{len(b)}"
        print(f"{kind:<20}{frames:>12}{med(a, 0):>15}{med(b, 0):>16}{med(a, 1):>16}{med(b, 1):>17}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
