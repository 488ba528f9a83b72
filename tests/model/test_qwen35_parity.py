"""Issue 11: Qwen3.5 / Qwen3.5-MoE checkpoints saved by transformers load and compute what
transformers computes: prefill logits, token-by-token decode, a prompt chunk packed with
decode rows and speculative verification rows, each within 1e-4 in fp32."""

from __future__ import annotations

import pytest
import torch

from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors
from ignition.model.step import run_step
from ignition.model.weights import load_checkpoint
from tests.model.conftest import new_state
from tests.model.helpers import decode_rows
from tests.model.hf_checkpoints import Variant, write_qwen35

pytest.importorskip("transformers")

ATOL = 1e-4
PROMPT = [11, 400, 7, 93, 1200, 5, 64, 3000, 18, 2, 77, 512, 9, 41, 2048, 3]
CONTINUATION = [150, 6, 999, 31, 4000, 12]

VARIANTS = {
    "dense": Variant(),
    "moe": Variant(moe=True),
    "dense-text-only": Variant(multimodal=False, seed=1),
    "dense-tied": Variant(tie_word_embeddings=True, mtp=False, seed=3),
    "moe-fused-experts-sharded": Variant(moe=True, fused_experts=True, sharded=True, seed=2),
}


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def pair(request, tmp_path_factory):
    """(ignition model, transformers model) of one checkpoint layout."""
    path = tmp_path_factory.mktemp(request.param)
    reference = write_qwen35(path, VARIANTS[request.param])
    return load_checkpoint(path).model, reference


def reference_logits(reference, tokens: list[int]) -> torch.Tensor:
    """transformers' logits at every position of ``tokens`` (one full forward)."""
    with torch.no_grad():
        return reference(input_ids=torch.tensor([tokens]), use_cache=False).logits[0].float()


def prefill_logits(model, state, slot: int, prompt: list[int]) -> torch.Tensor:
    capacity = PackedCapacity.mixed(1, 1, 64)
    inputs = PackedInputs.build(capacity, [prompt], [slot], prefill_row=0)
    out = run_step(model, state, inputs, capacity, SamplingTensors.greedy(1))
    return out.target.logits[: len(prompt)]


def test_prefill_last_position_logits_match_transformers(pair):
    model, reference = pair
    ours = prefill_logits(model, new_state(model.config), 0, PROMPT)
    torch.testing.assert_close(ours[-1], reference_logits(reference, PROMPT)[-1], atol=ATOL, rtol=0)


def test_token_by_token_decode_matches_transformers(pair):
    model, reference = pair
    state = new_state(model.config)
    prefill_logits(model, state, 0, PROMPT)
    expected = reference_logits(reference, PROMPT + CONTINUATION)[len(PROMPT) :]
    for i, token in enumerate(CONTINUATION):
        out = decode_rows(model, state, [[token]], [0], width=1)
        torch.testing.assert_close(out.target.logits[0], expected[i], atol=ATOL, rtol=0)


def test_prompt_chunk_packed_with_decode_rows_matches_transformers(pair):
    model, reference = pair
    state = new_state(model.config)
    prefill_logits(model, state, 0, PROMPT)
    other = PROMPT[::-1]
    capacity = PackedCapacity.mixed(2, 1, 64)
    inputs = PackedInputs.build(capacity, [other, CONTINUATION[:1]], [1, 0], prefill_row=0)
    target = run_step(model, state, inputs, capacity, SamplingTensors.greedy(2)).target
    logits, starts = target.logits, target.meta.cu_query_lens.tolist()
    torch.testing.assert_close(
        logits[starts[1] - 1], reference_logits(reference, other)[-1], atol=ATOL, rtol=0
    )
    decode_at = starts[1]
    expected = reference_logits(reference, PROMPT + CONTINUATION[:1])[-1]
    torch.testing.assert_close(logits[decode_at], expected, atol=ATOL, rtol=0)


def test_speculative_verification_rows_match_transformers(pair):
    model, reference = pair
    state = new_state(model.config)
    prefill_logits(model, state, 0, PROMPT)
    prefill_logits(model, state, 1, PROMPT[:9])
    rows = [CONTINUATION[:4], CONTINUATION[2:6]]
    out = decode_rows(model, state, rows, [0, 1], width=4)
    for r, (context, row) in enumerate(zip([PROMPT, PROMPT[:9]], rows, strict=True)):
        expected = reference_logits(reference, context + row)[len(context) :]
        torch.testing.assert_close(
            out.target.logits[4 * r : 4 * r + 4], expected, atol=ATOL, rtol=0
        )
