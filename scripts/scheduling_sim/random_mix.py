"""Frame mix of the recipe benchmark (random tokens, closed loop) for named policies.

    python -m scripts.scheduling_sim.random_mix --concurrency 8 \
        --policies helios,vllm-b8192-k1-padded

Per policy: output tokens/s, p50 TTFT and TPOT, and per frame class (kind, widest
verification) the frames, device seconds, mean duration, decoders served and prompt
tokens per frame: where the device time of ``realworld.py``'s random study goes.
"""

from __future__ import annotations

import argparse
import collections
from collections.abc import Sequence

from ignition.simulate.harness import run_policy
from ignition.simulate.metrics import measure
from scripts.scheduling_sim.realworld import random_workload, setup_for

ENVELOPE = {8: 32, 64: 128}


def frame_mix(policy: str, concurrency: int, profile: str) -> list[str]:
    setup = setup_for(profile, concurrency, ENVELOPE.get(concurrency, 128))
    run = run_policy(policy, random_workload(concurrency), setup)
    m = measure(run)
    lines = [
        f"{policy} at concurrency {concurrency}: {m.output_tokens_per_s:.0f} tok/s, "
        f"p50 TTFT {m.ttft_ms.p50 / 1e3:.2f} s, p50 TPOT {m.tpot_ms.p50:.1f} ms, "
        f"{run.end_ms / 1e3:.1f} s in all"
    ]
    mix: dict[tuple[str, int], list[float]] = collections.defaultdict(lambda: [0, 0.0, 0, 0])
    for e in run.executions:
        row = mix[(e.kind, e.width)]
        row[0] += 1
        row[1] += e.end_ms - e.start_ms
        row[2] += e.decoders
        row[3] += e.prompt_tokens
    for (kind, width), (n, ms, decoders, prompt) in sorted(mix.items(), key=lambda x: -x[1][1]):
        lines.append(
            f"  {kind:<12} width {width}: {int(n):>5} frames {ms / 1e3:6.1f} s "
            f"mean {ms / n:5.1f} ms, {decoders / n:5.1f} decoders, {prompt / n:6.0f} prompt tokens"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--policies", default="helios,vllm-b8192-k1-padded")
    parser.add_argument("--profile", default="qwen38-flash-next-4xh100")
    args = parser.parse_args(argv)
    for policy in args.policies.split(","):
        print("\n".join(frame_mix(policy.strip(), args.concurrency, args.profile)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
