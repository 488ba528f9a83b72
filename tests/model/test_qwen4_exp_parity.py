"""Issue 31: a Qwen3.8-Flash-Next (``qwen4_exp``) checkpoint saved by transformers, every
parameter random, two PLE layers and a QSA index budget below the prompt length, computes
what transformers computes (fp32 logits within 1e-4): prefill, a prefill chunked across the
budget and across compression blocks, decode, a prompt chunk packed with decode rows, and
4-wide verification rows."""

from __future__ import annotations

import pytest
import torch

from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors
from ignition.model.step import run_step
from tests.model.conftest import new_state
from tests.model.helpers import decode_rows
from tests.model.hf_checkpoints import EOS_TOKEN_ID

pytest.importorskip("transformers")

ATOL = 1e-4
_tokens = torch.randint(9, 4096, (52,), generator=torch.Generator().manual_seed(5)).tolist()
_tokens[9] = _tokens[10] = _tokens[23] = EOS_TOKEN_ID  # n-gram segments end at EOS
PROMPT = _tokens[:40]  # five times the index budget (8 tokens, blocks of 4)
CONTINUATION = _tokens[40:]


@pytest.fixture(scope="module")
def pair(qwen4_model, qwen4_checkpoint):
    return qwen4_model, qwen4_checkpoint[1]


def reference_logits(reference, tokens: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return reference(input_ids=torch.tensor([tokens]), use_cache=False).logits[0].float()


def prompt_logits(model, state, slot: int, prompt: list[int], chunk: int = 64) -> torch.Tensor:
    """Every prompt position's logits, the prompt consumed in chunks of ``chunk``."""
    capacity = PackedCapacity.mixed(1, 1, 64)
    pieces = []
    for start in range(0, len(prompt), chunk):
        piece = prompt[start : start + chunk]
        inputs = PackedInputs.build(capacity, [piece], [slot], prefill_row=0)
        out = run_step(model, state, inputs, capacity, SamplingTensors.greedy(1))
        pieces.append(out.target.logits[: len(piece)])
    return torch.cat(pieces)


def max_diff(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    return float((ours.detach() - theirs).abs().max())


def test_prompt_is_longer_than_the_index_budget(pair):
    model, _ = pair
    index = model.config.qsa_indexer
    assert index is not None and len(PROMPT) > 4 * index.budget
    assert len(model.config.ngram_ple.layers) == 2


def test_prefill_logits_match_transformers(pair):
    model, reference = pair
    ours = prompt_logits(model, new_state(model.config), 0, PROMPT)
    assert max_diff(ours, reference_logits(reference, PROMPT)) < ATOL


@pytest.mark.parametrize("chunk", [13, 6])
def test_chunked_prefill_across_budget_and_blocks_matches_transformers(pair, chunk):
    model, reference = pair
    ours = prompt_logits(model, new_state(model.config), 0, PROMPT, chunk=chunk)
    assert max_diff(ours, reference_logits(reference, PROMPT)) < ATOL


def test_token_by_token_decode_matches_transformers(pair):
    model, reference = pair
    state = new_state(model.config)
    prompt_logits(model, state, 0, PROMPT)
    expected = reference_logits(reference, PROMPT + CONTINUATION)[len(PROMPT) :]
    for i, token in enumerate(CONTINUATION):
        out = decode_rows(model, state, [[token]], [0], width=1)
        assert max_diff(out.target.logits[0], expected[i]) < ATOL, i


def test_prompt_chunk_packed_with_decode_rows_matches_transformers(pair):
    model, reference = pair
    state = new_state(model.config)
    prompt_logits(model, state, 0, PROMPT)
    prompt_logits(model, state, 2, PROMPT[:21])
    other = PROMPT[::-1]
    capacity = PackedCapacity.mixed(3, 1, 64)
    rows = [CONTINUATION[:1], other, CONTINUATION[3:4]]
    inputs = PackedInputs.build(capacity, rows, [0, 1, 2], prefill_row=1)
    target = run_step(model, state, inputs, capacity, SamplingTensors.greedy(3)).target
    starts = target.meta.cu_query_lens.tolist()
    logits = target.logits
    assert max_diff(logits[starts[0]], reference_logits(reference, PROMPT + rows[0])[-1]) < ATOL
    assert max_diff(logits[starts[1] : starts[2]], reference_logits(reference, other)) < ATOL
    expected = reference_logits(reference, PROMPT[:21] + rows[2])[-1]
    assert max_diff(logits[starts[2]], expected) < ATOL


def test_four_wide_verification_rows_match_transformers(pair):
    model, reference = pair
    state = new_state(model.config)
    prompt_logits(model, state, 0, PROMPT)
    prompt_logits(model, state, 1, PROMPT[:15])
    rows = [CONTINUATION[:4], CONTINUATION[5:9]]
    out = decode_rows(model, state, rows, [0, 1], width=4)
    for r, (context, row) in enumerate(zip([PROMPT, PROMPT[:15]], rows, strict=True)):
        expected = reference_logits(reference, context + row)[len(context) :]
        assert max_diff(out.target.logits[4 * r : 4 * r + 4], expected) < ATOL, r


def test_conditional_generation_checkpoint_matches_transformers(tmp_path):
    """The multimodal class nests the trunk under model.language_model.* beside the tower."""
    from ignition.model.weights import load_checkpoint
    from tests.model.hf_checkpoints import write_qwen4_exp

    reference = write_qwen4_exp(tmp_path, seed=1, multimodal=True)
    model = load_checkpoint(tmp_path).model
    assert model.visual is not None
    state = new_state(model.config)
    ours = prompt_logits(model, state, 0, PROMPT, chunk=13)
    assert max_diff(ours, reference_logits(reference, PROMPT)) < ATOL
    out = decode_rows(model, state, [CONTINUATION[:4]], [0], width=4)
    expected = reference_logits(reference, PROMPT + CONTINUATION[:4])[len(PROMPT) :]
    assert max_diff(out.target.logits[:4], expected) < ATOL
