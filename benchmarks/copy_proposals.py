"""Copy proposals (prompt lookup, the "ngram" method) against the MTP head's learned drafts.

Issue 28: a request whose speculative method is "ngram" verifies, each round, the
continuation of its latest suffix found earlier in its own prompt and output
(runtime/proposals/copy_drafts.py); Helios prices it by the copy source's acceptance. This runs an
editing workload on the embedded checkpoint (the trained qwen38-tiny) through the real
engine, greedy, with speculation off and with fixed / adaptive speculation, with learned
drafts only (mtp), copy drafts only (ngram) and both (Helios choosing the source of
every round by each source's measured acceptance, helios/decide/sources.py); per method
it prints the rounds given to copies ("copy share"), the accepted drafts per speculative
round, output tokens per decode frame, tokens/s (CPU wall clock, every row in the same
run, against speculation off) and whether the output equals speculation off (it must:
verification is coupled and exact). "rounds / frame" is
the share of decode lane-frames that verified drafts: Helios prices each round by its
source's acceptance and the programs' measured cost, and a copying row with no match
verifies none.

The workload, and why copying is right in it: an edit's output repeats most of a file
in its prompt. A tiny model does not edit files, so the "file" is the model's own text:
for each code prompt P the model's greedy continuation G of P (speculation off) makes
the file P + G, and the editing request's prompt is that file followed by P again. Its
greedy output continues P a second time, and wherever it says G again a copy of G is
the right proposal. The table prints how much of the outputs repeats G (the longest
common prefix over the output length): that is the part of the workload copying can win.

    .venv/bin/python -m benchmarks.copy_proposals [--max-tokens 64] [--prompts 8]
        [--workload edit|fresh]

A second workload, ``--workload fresh``, runs the code prompts themselves (no file to
repeat): there copying rarely helps, and "both" should stay near mtp.
"""

from __future__ import annotations

import argparse
import time

import torch
from tokenizers import Tokenizer

from benchmarks.draft_processing import ASSET, PROMPTS, Decoder
from ignition.components.capacity import plan_catalog
from ignition.kernels import use_backend
from ignition.model.weights import load_checkpoint
from ignition.recipes import LoadOptions, get_recipe
from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.proposals.copy_drafts import COPIES
from ignition.runtime.requests.request import GenerationRequest, SamplingParams


def run(model, catalog, tokenizer, speculation: str, method: str, prompts, max_tokens: int):
    """(outputs, counts, seconds): counts holds decode lane-frames, speculative rounds
    (lane-frames that verified drafts), drafts offered and accepted, and output tokens."""
    options = RuntimeOptions(num_slots=4, page_size=64, speculation=speculation)
    engine = assemble_engine(model, catalog, Decoder(tokenizer), [], options)
    counts = {"frames": 0, "rounds": 0, "copies": 0, "offered": 0, "accepted": 0, "tokens": 0}

    def listen(plan, result):
        for i, lane in enumerate(plan.lanes):
            if lane.role.value != "decode":
                continue
            emitted = len(result.records[i].token_ids)
            offered = result.num_offered_drafts[i] if result.num_offered_drafts else 0
            counts["frames"] += 1
            counts["tokens"] += emitted
            if offered:
                counts["rounds"] += 1
                counts["copies"] += lane.proposal_source == COPIES
                counts["offered"] += offered
                counts["accepted"] += max(0, emitted - 1)

    engine.frame_listeners.append(listen)
    sampling = SamplingParams(
        max_tokens=max_tokens, temperature=0.0, ignore_eos=True, speculative_method=method
    )
    outputs: dict[int, list[int]] = {i: [] for i in range(len(prompts))}
    for i, ids in enumerate(prompts):
        engine.submit(
            GenerationRequest(f"p{i}", tuple(ids), sampling),
            lambda chunk, i=i: outputs[i].extend(chunk.token_ids),
        )
    start = time.perf_counter()
    engine.run_until_idle(max_steps=100_000)
    return outputs, counts, time.perf_counter() - start


def editing_prompts(model, catalog, tokenizer, count: int, max_tokens: int):
    """(prompts P + G + P, continuations G): G is the model's greedy continuation of P."""
    firsts = [tokenizer.encode(text).ids for text in PROMPTS[:count]]
    earlier, _, _ = run(model, catalog, tokenizer, "off", "mtp", firsts, max_tokens)
    prompts = [[*p, *earlier[i], *p] for i, p in enumerate(firsts)]
    return prompts, [earlier[i] for i in range(len(firsts))]


def repeated_fraction(outputs: dict[int, list[int]], earlier: list[list[int]]) -> float:
    """Output tokens before each output first departs from G, over all output tokens."""
    same = total = 0
    for i, out in outputs.items():
        total += len(out)
        for a, b in zip(out, earlier[i], strict=False):
            if a != b:
                break
            same += 1
    return same / max(1, total)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--workload", choices=("edit", "fresh"), default="edit")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = load_checkpoint(ASSET).model
    tokenizer = Tokenizer.from_file(str(ASSET / "tokenizer.json"))
    catalog = plan_catalog(get_recipe("qwen38"), LoadOptions(mixed_prefill=True))
    with use_backend("reference"):
        prompts, earlier = editing_prompts(model, catalog, tokenizer, args.prompts, args.max_tokens)
        if args.workload == "fresh":  # the code prompts alone: nothing earlier to repeat
            prompts = [tokenizer.encode(text).ids for text in PROMPTS[: args.prompts]]
            earlier = [[] for _ in prompts]
        off, counts, seconds = run(
            model, catalog, tokenizer, "off", "mtp", prompts, args.max_tokens
        )
        base_rate = counts["tokens"] / seconds
        what = (
            "editing requests (file P + G, then P)" if args.workload == "edit" else "code prompts"
        )
        print(
            f"embedded qwen38-tiny, {len(prompts)} {what} x {args.max_tokens} greedy tokens; "
            f"{repeated_fraction(off, earlier):.0%} of the output repeats G before departing "
            "from it"
        )
        print(
            "| speculation | method | rounds / frame | copy share | accepted / round | "
            "offered / round | tokens / frame | tokens/s | vs off | output = off |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        _row("off", "-", counts, seconds, base_rate, True)
        for speculation in ("fixed", "adaptive"):
            for method in ("mtp", "ngram", "both"):
                outputs, counts, seconds = run(
                    model, catalog, tokenizer, speculation, method, prompts, args.max_tokens
                )
                _row(speculation, method, counts, seconds, base_rate, outputs == off)


def _row(speculation, method, counts, seconds, base_rate, same) -> None:
    rounds, frames = max(1, counts["rounds"]), max(1, counts["frames"])
    rate = counts["tokens"] / seconds
    print(
        f"| {speculation} | {method} | {counts['rounds'] / frames:.2f} | "
        f"{counts['copies'] / rounds:.2f} | {counts['accepted'] / rounds:.2f} | "
        f"{counts['offered'] / rounds:.2f} | {counts['tokens'] / frames:.2f} | {rate:.1f} | "
        f"{rate / base_rate:.2f}x | {same} |"
    )


if __name__ == "__main__":
    main()
