"""Benchmark (not a test): structured-output costs at a Qwen-size vocabulary on this machine.

Opens the grammar compiler over the embedded default tokenizer with the model vocabulary
padded to 151,936 ids, then prints the schema compile time, the host fill of one row's
bitmask, and the device-side mask beside its peer, one sampling call over the same rows.
Run: ``python -m tests.runtime.bench_grammar_mask``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import torch
from tokenizers import Tokenizer

from ignition.model.grammar_mask import apply_token_mask, mask_words
from ignition.model.sampling import SamplingTensors, sample
from ignition.runtime.grammar import GrammarCompiler, GrammarSpec, GrammarState
from tests.runtime.structured import SCHEMA

VOCAB = 151_936
ROWS = 8


def mean_ms(work: Callable[[], object], repeats: int = 20) -> float:
    work()
    start = time.perf_counter()
    for _ in range(repeats):
        work()
    return 1e3 * (time.perf_counter() - start) / repeats


def main() -> None:
    tokenizer = Tokenizer.from_file("ignition/assets/qwen38-tiny/tokenizer.json")
    start = time.perf_counter()
    compiler = GrammarCompiler(tokenizer, VOCAB, [2])
    opened_s = time.perf_counter() - start
    print(f"tokenizer {tokenizer.get_vocab_size()} ids, model {VOCAB}: opened in {opened_s:.2f} s")
    spec = GrammarSpec("json_schema", json.dumps(SCHEMA), "response_format.json_schema")
    start = time.perf_counter()
    grammar = compiler.compile(spec)  # the first time: xgrammar caches it
    print(f"schema compiled in {1e3 * (time.perf_counter() - start):.1f} ms")
    state = GrammarState(grammar)
    table = torch.zeros(1, mask_words(VOCAB), dtype=torch.int32)
    print(f"host fill of one row's bitmask: {mean_ms(lambda: state.fill(table, 0), 200):.3f} ms")
    logits = torch.randn(ROWS, VOCAB)
    bitmask = torch.full((ROWS, mask_words(VOCAB)), -1, dtype=torch.int32)
    masked = torch.ones(ROWS, dtype=torch.bool)
    params = SamplingTensors.build([1.0] * ROWS, top_p=[0.9] * ROWS, seed=list(range(ROWS)))
    positions = torch.arange(ROWS)
    mask_ms = mean_ms(lambda: apply_token_mask(logits, bitmask, masked))
    sample_ms = mean_ms(lambda: sample(logits, params, positions))
    print(
        f"{ROWS} rows x {VOCAB} on {logits.device}: apply_token_mask {mask_ms:.2f} ms, "
        f"sample (top_p 0.9) {sample_ms:.2f} ms, ratio {mask_ms / sample_ms:.2f}"
    )


if __name__ == "__main__":
    main()
