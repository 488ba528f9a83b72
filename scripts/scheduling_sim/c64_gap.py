"""Where random tokens at c = 64 (4x H100) spend their device time, per policy (issue 39).

    python -m scripts.scheduling_sim.c64_gap [--policies helios,vllm-padded] [--concurrency 64]
        [--frames] [--seed 0]

The run is the study's (``realworld.random_run`` at ``--seed``: 5 x c requests of 1,024
prompt and 256 output tokens at time zero, c slots). Both Helios and the baselines keep the device
busy from the first prompt's host gather to the end, so output tok/s follows the device
time spent on the same work. Each frame is compared with a *reference*: the device
model's duration of the same decoders at width one and the same prompt tokens, padded to
vLLM's capture sizes (what ``vllm-padded`` pays), every row at 1,150 cached tokens (the
prompt plus half the output). Categories: ``prompt`` (frames carrying more than 64 prompt
tokens), ``64-token chunk`` (the TBT rule's smallest chunk), ``width > 1`` (speculative
rounds; their reference is the same decoders at width one, so the excess buys the rounds
saved), ``width 1`` (generation frames; the excess is batch-bucket padding). ``rounds``
counts decoder rows served; fewer than the baseline's are accepted drafts. ``--frames`` also lists every
exploration frame (acceptance learning, timing refresh) with its start, program, decoders
and excess. Numbers are simulated.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ignition.components.program_kinds import GraphKind
from ignition.simulate.capture import vllm_capture_sizes
from ignition.simulate.devices import DeviceModel, Execution
from ignition.simulate.metrics import measure
from ignition.simulate.results import ORDINARY, ExecutionRecord
from scripts.scheduling_sim.realworld import random_run, random_setup

CONTEXT = 1150  # cached tokens per row: the 1,024-token prompt plus half of 256 outputs
CATEGORIES = ("prompt", "64-token chunk", "width > 1", "width 1")


def reference_ms(device: DeviceModel, slots: int, e: ExecutionRecord) -> float:
    """The device model's duration of ``e``'s decoders at width one and its prompt tokens,
    padded as ``vllm-padded`` pads."""
    prompt, decoders = e.prompt_tokens, e.decoders
    rows, tokens = decoders + (1 if prompt else 0), decoders + prompt
    padded = vllm_capture_sizes(slots, 0, 8192).pad(tokens)
    kind = GraphKind.DECODE
    if prompt:
        kind = GraphKind.MIXED if decoders else GraphKind.PREFILL
    contexts = (CONTEXT,) * decoders + ((0,) if prompt else ())
    return device.duration_ms(
        Execution(
            kind=kind,
            capacity_tokens=padded,
            capacity_rows=rows if prompt else max(rows, padded),
            tokens=tokens,
            rows=rows,
            context=CONTEXT * decoders,
            draft_steps=0,
            prompt_tokens=prompt,
            draft_rows=decoders,
            row_contexts=contexts,
        )
    )


def category(e: ExecutionRecord) -> str:
    if e.prompt_tokens:
        return "prompt" if e.prompt_tokens > 64 else "64-token chunk"
    return "width > 1" if e.width > 1 else "width 1"


def report(name: str, concurrency: int, frames: bool = False, seed: int = 0) -> list[str]:
    setup = random_setup(concurrency, seed)
    run = random_run(concurrency, name, seed)
    busy = sum(e.device_ms for e in run.executions)
    rounds = sum(e.decoders for e in run.executions)
    lines = [
        f"| `{name}` | {measure(run).output_tokens_per_s:,.0f} tok/s, end {run.end_ms:,.0f} ms, "
        f"device {busy:,.0f} ms, {len(run.executions)} frames, {rounds:,} decoder rounds |"
    ]
    for cat in CATEGORIES:
        frames = [e for e in run.executions if category(e) == cat]
        if frames:
            got = sum(e.device_ms for e in frames)
            ref = sum(reference_ms(setup.device, concurrency, e) for e in frames)
            lines.append(
                f"| | {cat}: {len(frames)} frames, {got:,.0f} ms, reference {ref:,.0f} ms, "
                f"excess {got - ref:+,.0f} ms |"
            )
    if frames:
        for e in run.executions:
            if e.execution_class != ORDINARY:
                excess = e.device_ms - reference_ms(setup.device, concurrency, e)
                lines.append(
                    f"| | {e.start_ms / 1e3:.1f} s {e.execution_class}: `{e.graph}`, "
                    f"{e.decoders} decoders, {e.device_ms:.0f} ms, excess {excess:+.0f} ms |"
                )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default="helios,vllm-padded")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--frames", action="store_true", help="list exploration frames")
    parser.add_argument("--seed", type=int, default=0, help="the workload's and simulator's")
    args = parser.parse_args(argv)
    if args.concurrency < 1:
        parser.error(f"--concurrency {args.concurrency}: must be >= 1")
    print("| policy | device time |")
    print("|---|---|")
    for name in (p.strip() for p in args.policies.split(",") if p.strip()):
        print("\n".join(report(name, args.concurrency, args.frames, args.seed)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
