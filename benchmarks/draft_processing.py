"""MTP draft acceptance with and without logits processing on the drafts (a benchmark).

Issue 15: speculative rounds used to propose drafts from the draft head's unprocessed
logits, so under penalties, logit bias or min_tokens the drafts ignored what the target
obeys and were rejected. This runs one workload on the embedded checkpoint (the trained
qwen38-tiny) through the real engine, greedy, with speculation fixed and adaptive, once
with drafts from processed logits (the default) and once without, checks that the output
is the same, and prints the acceptance rate and accepted drafts per speculative round.

    .venv/bin/python benchmarks/draft_processing.py [--max-tokens 48]
        [--repetition-penalty 1.3] [--frequency-penalty 0.0] [--prompts 8]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from tokenizers import Tokenizer

import ignition
from ignition.components.capacity import plan_catalog
from ignition.kernels import use_backend
from ignition.model.weights import load_checkpoint
from ignition.recipes import LoadOptions, get_recipe
from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.requests.request import GenerationRequest, SamplingParams

ASSET = Path(ignition.__file__).parent / "assets" / "qwen38-tiny"
PROMPTS = [
    "import os\nimport sys\n\n\ndef main():\n",
    "class Config:\n    def __init__(self, path):\n",
    "def read_lines(path):\n    with open(path) as f:\n",
    "for i in range(10):\n    if i % 2 == 0:\n",
    "import json\n\ndata = json.loads(text)\nfor key in data:\n",
    "def parse(args):\n    parser = argparse.ArgumentParser()\n",
    "try:\n    value = int(text)\nexcept ValueError:\n",
    "class Node:\n    def __init__(self, value):\n        self.value = value\n",
]


class Decoder:
    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)


def run(
    model, catalog, tokenizer, speculation: str, sampling: SamplingParams, prompts, processed=True
):
    """(tokens per prompt, acceptance rate, accepted drafts per speculative lane-round)."""
    options = RuntimeOptions(
        num_slots=4,
        page_size=64,
        speculation=speculation,
        drafts_from_processed_logits=processed,
    )
    engine = assemble_engine(model, catalog, Decoder(tokenizer), [], options)
    outputs = {i: [] for i in range(len(prompts))}
    for i, text in enumerate(prompts):
        request = GenerationRequest(f"p{i}", tuple(tokenizer.encode(text).ids), sampling)
        engine.submit(request, lambda chunk, i=i: outputs[i].extend(chunk.token_ids))
    engine.run_until_idle(max_steps=100_000)
    stats = engine.stats.snapshot()
    rate = stats.speculative_accepted_tokens / max(1, stats.speculative_draft_tokens)
    per_round = stats.speculative_accepted_tokens / max(1, stats.speculative_rounds)
    return outputs, rate, per_round


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--repetition-penalty", type=float, default=1.3)
    parser.add_argument("--frequency-penalty", type=float, default=0.0)
    parser.add_argument("--prompts", type=int, default=len(PROMPTS))
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = load_checkpoint(ASSET).model
    tokenizer = Tokenizer.from_file(str(ASSET / "tokenizer.json"))
    catalog = plan_catalog(get_recipe("qwen38"), LoadOptions(mixed_prefill=True))
    sampling = SamplingParams(
        max_tokens=args.max_tokens,
        temperature=0.0,
        ignore_eos=True,
        repetition_penalty=args.repetition_penalty,
        frequency_penalty=args.frequency_penalty,
    )
    prompts = PROMPTS[: args.prompts]
    print(
        f"embedded qwen38-tiny, {len(prompts)} prompts x {args.max_tokens} greedy tokens, "
        f"repetition_penalty {args.repetition_penalty}, frequency_penalty "
        f"{args.frequency_penalty}"
    )
    with use_backend("reference"):
        off, _, _ = run(model, catalog, tokenizer, "off", sampling, prompts)
        for speculation in ("fixed", "adaptive"):
            results = {}
            for processed in (False, True):
                results[processed] = run(
                    model, catalog, tokenizer, speculation, sampling, prompts, processed
                )
            same = all(results[p][0] == off for p in results)
            for processed, (_, rate, per_round) in results.items():
                label = "processed" if processed else "raw      "
                print(
                    f"speculation {speculation:8s} drafts from {label} logits: acceptance "
                    f"{rate:6.1%}, accepted drafts per lane-round {per_round:5.2f}"
                )
            print(f"speculation {speculation:8s} output identical to speculation off: {same}")


if __name__ == "__main__":
    main()
