"""What per-class verification widths can buy at overload, on a profile's device model.

    python -m scripts.scheduling_sim.two_class_bound [--profile P] [--top 10]

``two_class``'s workload at steady state: B = 32 slots stay full, every resident
decodes in every frame, and a request that finishes is replaced from the queue, which
alternates the classes. A class verifying w_c rows a round delivers E_c = 1 + a + ... +
a^(w_c - 1) tokens a round (a its acceptance per position), so its requests hold their
slots for 1 / E_c of the rounds and the residents split in proportion to that: a wider
0.9 class leaves sooner and the frames fill with 0.35 requests. For every pair of widths
it prints the frame's output tokens per ms on the device model, for a rectangular
program (P = B x max width, the idle rows padding) and for a ragged one holding exactly
the rows used (P = the rows, a what-if catalog). An upper bound on what any width rule
buys on the frames' side: prompts, left-out decoders and the run's tail are not in it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from ignition.components.program_kinds import GraphKind
from ignition.simulate.devices import DeviceError, device_from_spec
from ignition.simulate.devices.base import Execution
from scripts.scheduling_sim.two_class import HIGH, LOW

SLOTS = 32
MAX_ROWS = 128  # the workload's speculative token capacity R
CONTEXT = 640  # a resident's cached tokens midway: 512 prompt + half of 256 outputs


@dataclass(frozen=True)
class Point:
    high_width: int
    low_width: int
    program: str  # "rectangular" or "ragged"
    high_residents: float
    duration_ms: float
    tokens_per_ms: float


def expected_tokens(acceptance: float, width: int) -> float:
    return sum(acceptance**k for k in range(width))


def points(profile: str, max_width: int = 6) -> list[Point]:
    """Every (0.9 width, 0.35 width) pair with the 0.35 class no wider, best first."""
    device = device_from_spec(profile)
    out = []
    for wh in range(1, max_width + 1):
        for wl in range(1, wh + 1):
            eh, el = expected_tokens(HIGH, wh), expected_tokens(LOW, wl)
            high = SLOTS * (1 / eh) / (1 / eh + 1 / el)
            rows = round(high * wh + (SLOTS - high) * wl)
            tokens = high * eh + (SLOTS - high) * el
            for program, capacity in (("rectangular", SLOTS * wh), ("ragged", rows)):
                if capacity > MAX_ROWS:
                    continue
                e = Execution(
                    GraphKind.SPECULATIVE if wh > 1 else GraphKind.DECODE,
                    capacity,
                    SLOTS,
                    rows,
                    SLOTS,
                    SLOTS * CONTEXT,
                    draft_steps=wh - 1,
                    draft_rows=SLOTS,
                    row_contexts=(CONTEXT,) * SLOTS,
                )
                t = device.duration_ms(e)
                out.append(Point(wh, wl, program, high, t, tokens / t))
    return sorted(out, key=lambda p: -p.tokens_per_ms)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="qwen38-flash-next-h200")
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args(argv)
    try:
        found = points(args.profile)
    except DeviceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print("| 0.9 width | 0.35 width | program | 0.9 residents of 32 | frame | tok / ms |")
    print("|---|---|---|---|---|---|")
    for p in found[: args.top]:
        print(
            f"| {p.high_width} | {p.low_width} | {p.program} | {p.high_residents:.1f} | "
            f"{p.duration_ms:.1f} ms | {p.tokens_per_ms:.3f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
