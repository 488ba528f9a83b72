"""What coupled verification costs in acceptance, against rejection sampling (a benchmark).

Issue 24, defect 2: with rejection verification a seeded request's tokens depended on the
widths Helios chose. Coupled verification (``ignition.model.coupled_verify``, the default)
keeps a draft only when it equals the token ordinary sampling emits at its position, so the
output never depends on speculation; it accepts less often than rejection sampling, whose
acceptance probability 1 - TV(p, q) is the best any exact verifier can reach.

This runs the embedded checkpoint (the trained qwen38-tiny) through the real engine with
fixed-width speculation at several temperatures, once per verification mode, and prints the
acceptance rate (accepted / offered drafts), accepted drafts per speculative lane-round,
whether the output equals speculation off, and the coupled / rejection ratio.

    .venv/bin/python benchmarks/coupled_acceptance.py [--max-tokens 48] [--prompts 8]
"""

from __future__ import annotations

import argparse

import torch
from tokenizers import Tokenizer

from benchmarks.draft_processing import ASSET, PROMPTS, run
from ignition.components.capacity import plan_catalog
from ignition.kernels import use_backend
from ignition.model.coupled_verify import use_verification
from ignition.model.weights import load_checkpoint
from ignition.recipes import LoadOptions, get_recipe
from ignition.runtime.requests.request import SamplingParams


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--prompts", type=int, default=len(PROMPTS))
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.3, 0.7, 1.0])
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = load_checkpoint(ASSET).model
    tokenizer = Tokenizer.from_file(str(ASSET / "tokenizer.json"))
    catalog = plan_catalog(get_recipe("qwen38"), LoadOptions(mixed_prefill=True))
    prompts = PROMPTS[: args.prompts]
    print("| temperature | verification | acceptance | accepted / round | output = spec off |")
    print("|---|---|---|---|---|")
    with use_backend("reference"):
        for temperature in args.temperatures:
            sampling = SamplingParams(
                max_tokens=args.max_tokens, temperature=temperature, seed=7, ignore_eos=True
            )
            reference, _, _ = run(model, catalog, tokenizer, "off", sampling, prompts)
            rates = {}
            for mode in ("rejection", "coupled"):
                with use_verification(mode):
                    outputs, rate, per_round = run(
                        model, catalog, tokenizer, "fixed", sampling, prompts
                    )
                rates[mode] = rate
                same = sum(outputs[i] == reference[i] for i in outputs)
                print(
                    f"| {temperature} | {mode} | {rate:.3f} | {per_round:.2f} | "
                    f"{same} of {len(outputs)} |"
                )
            ratio = rates["coupled"] / max(rates["rejection"], 1e-9)
            print(f"| {temperature} | coupled / rejection | {ratio:.2f}x | | |")


if __name__ == "__main__":
    main()
