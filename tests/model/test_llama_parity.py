"""Issue 11: a Llama 3.2-layout checkpoint (GQA, tied embeddings, llama3 rope scaling) runs
through the shared model code and matches transformers' LlamaForCausalLM within 1e-4."""

from __future__ import annotations

import pytest
import torch

from ignition.model.weights import load_checkpoint
from tests.model.conftest import new_state
from tests.model.helpers import decode_rows
from tests.model.hf_checkpoints import write_llama
from tests.model.test_qwen35_parity import (
    ATOL,
    CONTINUATION,
    PROMPT,
    prefill_logits,
    reference_logits,
)

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    path = tmp_path_factory.mktemp("llama")
    reference = write_llama(path)
    return load_checkpoint(path).model, reference


def test_llama_is_attention_only_with_a_tied_head_and_no_draft_head(pair):
    model, _ = pair
    assert set(model.config.layer_types) == {"qsa"} and model.mtp is None
    assert model.lm_head.weight is model.embed_tokens.weight
    assert model.config.rope_scaling is not None


def test_llama_prefill_and_decode_logits_match_transformers(pair):
    model, reference = pair
    state = new_state(model.config)
    expected = reference_logits(reference, PROMPT + CONTINUATION)
    ours = prefill_logits(model, state, 0, PROMPT)
    torch.testing.assert_close(ours, expected[: len(PROMPT)], atol=ATOL, rtol=0)
    for i, token in enumerate(CONTINUATION):
        out = decode_rows(model, state, [[token]], [0], width=1)
        torch.testing.assert_close(
            out.target.logits[0], expected[len(PROMPT) + i], atol=ATOL, rtol=0
        )
