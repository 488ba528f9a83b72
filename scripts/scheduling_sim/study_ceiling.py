"""The capacity ceiling of the real-world study's conversation trace, per device profile.

    python -m scripts.scheduling_sim.study_ceiling [--profiles P1,P2] [--docs docs/capacity.md]

An upper bound on the load (the study's load units) any scheduler can sustain on the
study's device model, whatever it chooses: every frame is a set of B decoders verifying
W target rows each beside a prompt chunk of c tokens (B = 0: prefill only; c = 0:
generation only), priced by the profile's device model with no padding (the active
extents are the physical ones), the chunk at zero cached context and the decoders at
the trace's output-weighted mean context; B <= the study's 32 slots and B x W <= its
R = 128 for W > 1. A frame delivers B x E[out(W)] output tokens (E from each request's
own acceptance, output-weighted; one width per frame) and c prompt tokens. The device
never idles, so the best mix of frames is a linear programme: load L is feasible when
some time shares of the frames, summing to one, deliver L times the trace's output and
prompt demand per ms. By duality

    L* = min over theta in [0, 1] of max over frames f of
         theta x out_f / (T_f x d_out) + (1 - theta) x prompt_f / (T_f x d_prompt),

which ``lp_ceiling`` evaluates on a grid of theta (each grid value bounds L* from
above, so the grid's minimum is still an upper bound). TTFT, TBT, the window's edges
and the host's prompt gathers are ignored: a policy's capacity at any SLO lies below.
The table compares it with ``vllm-k1-padded``'s capacity from the study's block in
``docs/capacity.md``: a ceiling below 1.15x that capacity means no scheduler reaches
the 1.15x target on that device model.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ignition.components.program_kinds import GraphKind
from ignition.simulate.bounds import expected_output
from ignition.simulate.devices import DeviceModel, Execution
from scripts.scheduling_sim.realworld import PROFILES, Plan, conv_workload, setup_for

SLOTS, ENVELOPE, MAX_WIDTH = 32, 128, 6
CHUNKS = (0, 64, 128, 256, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192)
DOCS = Path(__file__).resolve().parents[2] / "docs" / "capacity.md"
BASELINE = "vllm-k1-padded"


@dataclass(frozen=True)
class Frame:
    """One frame type: B decoders at width W beside a c-token chunk, T ms."""

    batch: int
    width: int
    chunk: int
    duration_ms: float
    output_tokens: float
    prompt_tokens: int


@dataclass(frozen=True)
class Demand:
    """Per load unit: output and prompt tokens per ms, and the decoders' mean context and
    expected output per round at each width (index W - 1)."""

    output_per_ms: float
    prompt_per_ms: float
    context: int
    expected: tuple[float, ...]


def lp_ceiling(frames: Sequence[Frame], demand: Demand, grid: int = 20_001) -> float:
    """The highest load whose demand some time shares of ``frames`` meet (the dual's
    minimum over a grid of theta, an upper bound on the exact value)."""
    if not frames:
        raise ValueError("study ceiling: no frames")
    t = np.array([f.duration_ms for f in frames])
    a = np.array([f.output_tokens for f in frames]) / t / demand.output_per_ms
    b = np.array([f.prompt_tokens for f in frames]) / t / demand.prompt_per_ms
    theta = np.linspace(0.0, 1.0, grid)[:, None]
    return float((theta * a + (1 - theta) * b).max(axis=1).min())


def study_demand(rows: tuple[int, int] = (2000, 2600)) -> Demand:
    """The conversation study's window at load 1.0, with its assigned task acceptance."""
    requests = conv_workload(Plan(False, rows))(1.0)
    span = max(r.arrival_ms for r in requests) - min(r.arrival_ms for r in requests)
    out = sum(r.output_tokens for r in requests)
    prompt = sum(r.prompt_tokens for r in requests)
    context = sum(r.output_tokens * (r.prompt_tokens + r.output_tokens / 2) for r in requests)
    expected = tuple(
        sum(r.output_tokens * expected_output(r.acceptance, w) for r in requests) / out
        for w in range(1, MAX_WIDTH + 1)
    )
    return Demand(out / span, prompt / span, round(context / out), expected)


def frames_for(device: DeviceModel, demand: Demand) -> list[Frame]:
    """Every frame type of the study's build on ``device``, unpadded."""
    out = []
    for b in range(SLOTS + 1):
        for w in range(1, len(demand.expected) + 1) if b else (1,):
            if w > 1 and b * w > ENVELOPE:
                break
            for c in CHUNKS:
                if not b and not c:
                    continue
                rows_tokens = b * w
                kind = GraphKind.PREFILL
                if b:
                    kind = GraphKind.MIXED if c else (
                        GraphKind.SPECULATIVE if w > 1 else GraphKind.DECODE
                    )
                contexts = (0,) * (1 if c else 0) + (demand.context,) * b
                n, rows = rows_tokens + c, b + (1 if c else 0)
                execution = Execution(
                    kind, n, rows, n, rows, sum(contexts), w - 1,
                    prompt_tokens=c, draft_rows=b, row_contexts=contexts,
                )
                t = device.duration_ms(execution)
                out.append(Frame(b, w, c, t, b * demand.expected[w - 1], c))
    return out


def measured(profile: str, docs: Path = DOCS, policy: str = BASELINE) -> float | None:
    """``policy``'s conversation capacity on ``profile`` from the study's block."""
    pattern = re.compile(rf"^\| {re.escape(profile)} \| `{re.escape(policy)}` \| ([0-9.]+) \|")
    for line in docs.read_text().splitlines():
        m = pattern.match(line)
        if m:
            return float(m.group(1))
    return None


def best_generation(frames: Sequence[Frame], demand: Demand) -> Frame:
    """The generation frame with the fewest ms per expected output token."""
    gen = [f for f in frames if f.batch and not f.chunk]
    return min(gen, key=lambda f: f.duration_ms / f.output_tokens)


def table(profiles: Sequence[str], docs: Path = DOCS) -> list[str]:
    demand = study_demand()
    lines = [
        f"Demand per load unit: {demand.output_per_ms * 1e3:.0f} output and "
        f"{demand.prompt_per_ms * 1e3:.0f} prompt tokens/s; decoders' mean context "
        f"{demand.context}; E[out(W)] W = 1..{MAX_WIDTH}: "
        + ", ".join(f"{e:.2f}" for e in demand.expected),
        "",
        f"| profile | cheapest generation frame | ms / token | ceiling (load units) | "
        f"`{BASELINE}` | ceiling / it |",
        "|---|---|---|---|---|---|",
    ]
    for profile in profiles:
        device = setup_for(profile, SLOTS, ENVELOPE).device
        frames = frames_for(device, demand)
        ceiling = lp_ceiling(frames, demand)
        g = best_generation(frames, demand)
        got = measured(profile, docs)
        ratio = f"{ceiling / got:.2f}x" if got else "-"
        lines.append(
            f"| {profile} | B = {g.batch}, W = {g.width} | {g.duration_ms / g.output_tokens:.3f} | "
            f"{ceiling:.3f} | {got if got is not None else '-'} | {ratio} |"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", default=",".join(PROFILES))
    parser.add_argument("--docs", type=Path, default=DOCS)
    args = parser.parse_args(argv)
    print("\n".join(table([p for p in args.profiles.split(",") if p], args.docs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
