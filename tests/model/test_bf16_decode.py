"""Issue 30: a bf16 checkpoint serves in bf16 on CPU (native bf16 matmuls where the CPU has
AVX512-BF16 / AMX), prompt and token-by-token decode alike, within bf16's tolerance of
transformers' fp32 logits of the same weights; ``benchmarks/vs_transformers.py --dtype
bfloat16`` measures its speed. (The prompt alone is checked in test_family_loading.py.)"""

from __future__ import annotations

import pytest
import torch

from ignition.model.weights import load_checkpoint
from tests.model.conftest import new_state
from tests.model.helpers import decode_rows
from tests.model.hf_checkpoints import Variant, write_qwen35
from tests.model.test_qwen35_parity import CONTINUATION, PROMPT, prefill_logits, reference_logits

pytest.importorskip("transformers")


def test_bf16_decode_steps_stay_within_tolerance_of_fp32_transformers(tmp_path):
    reference = write_qwen35(tmp_path, Variant(dtype="bfloat16", multimodal=False, seed=8))
    model = load_checkpoint(tmp_path).model
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    state = new_state(model.config, device="cpu")
    prefill_logits(model, state, 0, PROMPT)
    expected = reference_logits(reference, PROMPT + CONTINUATION)[len(PROMPT) :]
    for i, token in enumerate(CONTINUATION):
        target = decode_rows(model, state, [[token]], [0], width=1).target
        assert target.hidden.dtype == torch.bfloat16  # the logits are projected, then fp32
        torch.testing.assert_close(target.logits[0], expected[i], atol=0.1, rtol=0.05)
