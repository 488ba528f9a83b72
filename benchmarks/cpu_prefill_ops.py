"""Where a CPU prefill's operator time goes, Ignition against transformers, by op and shape.

The same random checkpoint and prompt as ``vs_transformers.py`` (``--model qwen35`` or
``qwen4_exp``, fp32 or bf16, one thread): both sides serve ``--batch`` prompts of
``--prompt-tokens`` tokens (one by default; four run as one four-lane program) for one new
token, warmed up, then ``--runs`` times under ``torch.profiler``; the tables
list each side's operators by self CPU time, then the heaviest matrix products and
gathers by input shape, which is where the two implementations' work differs.

    PYTHONPATH=. .venv/bin/python benchmarks/cpu_prefill_ops.py --model qwen4_exp [--batch 4]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from benchmarks.vs_transformers import (
    DTYPES,
    MODELS,
    build_cpu_bundle,
    ignition_runner,
    transformers_runner,
)

SHAPED = ("aten::mm", "aten::bmm", "aten::index", "aten::_grouped_mm", "aten::index_select")


def profiled(run, runs: int):
    run(1)
    run(1)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(runs):
            run(1)
    return prof


def report(name: str, prof, runs: int, rows: int) -> None:
    total = sum(e.self_cpu_time_total for e in prof.key_averages()) / 1e3 / runs
    print(f"\n{name}: {total:.1f} ms of operator self time per prefill")
    print("| op | calls / prefill | ms / prefill |")
    print("|---|---:|---:|")
    ops = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:rows]
    for e in ops:
        print(f"| {e.key} | {e.count / runs:.0f} | {e.self_cpu_time_total / 1e3 / runs:.1f} |")
    print("| op | input shapes | calls / prefill | ms / prefill |")
    print("|---|---|---:|---:|")
    shaped = [e for e in prof.key_averages(group_by_input_shape=True) if e.key in SHAPED]
    for e in sorted(shaped, key=lambda e: -e.self_cpu_time_total)[:rows]:
        shapes = str([s for s in e.input_shapes if s])
        print(
            f"| {e.key} | {shapes} | {e.count / runs:.0f} | "
            f"{e.self_cpu_time_total / 1e3 / runs:.1f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="qwen4_exp")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rows", type=int, default=10)
    args = parser.parse_args()

    torch.set_num_threads(1)
    root = Path(tempfile.mkdtemp(prefix="ignition-prefill-ops-"))
    weights, bundle = root / "weights", root / "bundle"
    write, class_name, title = MODELS[args.model]
    write(weights, dtype=DTYPES[args.dtype])
    build_cpu_bundle(weights, bundle, args.prompt_tokens, 1)
    generator = torch.Generator().manual_seed(1)
    prompts = torch.randint(5, 4096, (args.batch, args.prompt_tokens), generator=generator).tolist()
    print(f"random {title}, {args.dtype}, one thread, {args.batch} x {args.prompt_tokens}-token prompt")
    sides = (
        ("Ignition", ignition_runner(bundle, prompts, 1, "balanced")),
        ("transformers", transformers_runner(weights, prompts, class_name, DTYPES[args.dtype])),
    )
    for name, run in sides:
        report(name, profiled(run, args.runs), args.runs, args.rows)
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
