"""Issue 11: Qwen3-Next checkpoints (in_proj_qkvz / in_proj_ba fused per key head) load
through the registry and match transformers' Qwen3NextForCausalLM within 1e-4."""

from __future__ import annotations

import pytest
import torch

from ignition.model.weights import load_checkpoint
from tests.model.conftest import new_state
from tests.model.helpers import decode_rows
from tests.model.hf_checkpoints import write_qwen3_next
from tests.model.test_qwen35_parity import (
    ATOL,
    CONTINUATION,
    PROMPT,
    prefill_logits,
    reference_logits,
)

pytest.importorskip("transformers")


def test_qwen3_next_prefill_and_decode_logits_match_transformers(tmp_path):
    reference = write_qwen3_next(tmp_path)
    loaded = load_checkpoint(tmp_path)
    model = loaded.model
    assert loaded.family.name == "qwen3_next" and model.mtp is None
    state = new_state(model.config)
    expected = reference_logits(reference, PROMPT + CONTINUATION)
    ours = prefill_logits(model, state, 0, PROMPT)
    torch.testing.assert_close(ours, expected[: len(PROMPT)], atol=ATOL, rtol=0)
    for i, token in enumerate(CONTINUATION):
        out = decode_rows(model, state, [[token]], [0], width=1)
        torch.testing.assert_close(
            out.target.logits[0], expected[len(PROMPT) + i], atol=ATOL, rtol=0
        )
