"""Grammar-forced drafts for structured outputs: tokens per frame with and without (a benchmark).

Issue 24: a grammar-constrained row verifies only drafts the host supplies, so the host
can mask every verification position (runtime/grammar.py); its grammar's forced tokens
(the keys and punctuation of a JSON schema, xgrammar's jump-forward tokens) are those
drafts. This runs json_schema requests on the embedded checkpoint (the trained
qwen38-tiny) through the real engine, greedy and seeded-sampled, with speculation off and
with fixed / adaptive speculation, without host drafts, with forced drafts, and with
forced drafts plus copy drafts where nothing is forced (runtime.proposals.copy_proposals),
and prints
per constrained request: output tokens per decode frame that served it, drafts offered
and accepted per frame, tokens/s (CPU wall clock, all modes in the same run), and whether
the output equals speculation off (it must: coupled verification under per-position masks
is exact).

    .venv/bin/python -m benchmarks.grammar_drafts [--max-tokens 96] [--prompts 4]
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from tokenizers import Tokenizer

from benchmarks.draft_processing import ASSET, PROMPTS, Decoder
from ignition.components.capacity import plan_catalog
from ignition.kernels import use_backend
from ignition.model.weights import load_checkpoint
from ignition.recipes import LoadOptions, get_recipe
from ignition.runtime.proposals import grammar_drafts
from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.grammar import GrammarCompiler, GrammarSpec, GrammarState
from ignition.runtime.requests.request import GenerationRequest, SamplingParams

SCHEMA = {
    "type": "object",
    "properties": {
        "function_name": {"type": "string", "maxLength": 16},
        "language": {"enum": ["python", "rust", "go"]},
        "num_arguments": {"type": "integer", "minimum": 0, "maximum": 9},
        "returns_value": {"type": "boolean"},
        "imports": {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 2},
    },
    "required": ["function_name", "language", "num_arguments", "returns_value", "imports"],
    "additionalProperties": False,
}
EOS = (2, 0)  # the embedded checkpoint's eos_token_id


def run(model, catalog, tokenizer, grammar, speculation: str, sampling: SamplingParams, prompts):
    """(outputs, decode lane-frames, drafts offered, drafts accepted, output tokens, s)."""
    options = RuntimeOptions(num_slots=4, page_size=64, speculation=speculation)
    engine = assemble_engine(model, catalog, Decoder(tokenizer), list(EOS), options)
    counts = {"frames": 0, "offered": 0, "accepted": 0, "tokens": 0}

    def listen(plan, result):
        for i, lane in enumerate(plan.lanes):
            if lane.role.value != "decode":
                continue
            emitted = len(result.records[i].token_ids)
            offered = result.num_offered_drafts[i] if result.num_offered_drafts else 0
            counts["frames"] += 1
            counts["tokens"] += emitted
            counts["offered"] += offered
            counts["accepted"] += max(0, emitted - 1) if offered else 0

    engine.frame_listeners.append(listen)
    outputs: dict[int, list[int]] = {i: [] for i in range(len(prompts))}
    for i, text in enumerate(prompts):
        request = GenerationRequest(f"p{i}", tuple(tokenizer.encode(text).ids), sampling)
        engine.submit(request, lambda chunk, i=i: outputs[i].extend(chunk.token_ids))
    start = time.perf_counter()
    engine.run_until_idle(max_steps=100_000)
    return outputs, counts, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 1.0])
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = load_checkpoint(ASSET).model
    tokenizer = Tokenizer.from_file(str(ASSET / "tokenizer.json"))
    compiler = GrammarCompiler(tokenizer, model.config.vocab_size, EOS)
    grammar = compiler.compile(GrammarSpec("json_schema", json.dumps(SCHEMA), "json_schema"))
    catalog = plan_catalog(get_recipe("qwen38"), LoadOptions(mixed_prefill=True))
    prompts = PROMPTS[: args.prompts]
    forced_drafts = GrammarState.forced_drafts
    print(f"embedded qwen38-tiny, {len(prompts)} json_schema requests x <= {args.max_tokens}")
    print(
        "| temperature | speculation | host drafts | tokens / frame | offered / frame | "
        "accepted / frame | tokens/s | vs none | output = off |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    with use_backend("reference"):
        for temperature in args.temperatures:
            sampling = SamplingParams(
                max_tokens=args.max_tokens, temperature=temperature, seed=7, grammar=grammar
            )
            off, counts, seconds = run(model, catalog, tokenizer, grammar, "off", sampling, prompts)
            _row(temperature, "off", "-", counts, seconds, None, True)
            for speculation in ("fixed", "adaptive"):
                rates = {}
                for label in ("none", "forced", "forced + copy"):
                    if label == "none":
                        GrammarState.forced_drafts = lambda self: ()
                    grammar_drafts.COPY_WHEN_UNFORCED = label == "forced + copy"
                    try:
                        outputs, counts, seconds = run(
                            model, catalog, tokenizer, grammar, speculation, sampling, prompts
                        )
                    finally:
                        GrammarState.forced_drafts = forced_drafts
                        grammar_drafts.COPY_WHEN_UNFORCED = False
                    rates[label] = counts["tokens"] / seconds
                    versus = None if label == "none" else rates[label] / rates["none"]
                    _row(temperature, speculation, label, counts, seconds, versus, outputs == off)


def _row(temperature, speculation, label, counts, seconds, versus, same) -> None:
    rounds = max(1, counts["frames"])
    print(
        f"| {temperature} | {speculation} | {label} | {counts['tokens'] / rounds:.2f} | "
        f"{counts['offered'] / rounds:.2f} | {counts['accepted'] / rounds:.2f} | "
        f"{counts['tokens'] / seconds:.1f} | {'' if versus is None else f'{versus:.2f}x'} | "
        f"{same} |"
    )


if __name__ == "__main__":
    main()
