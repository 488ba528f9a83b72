"""Qwen3.8-Flash-Next's forward on the Triton kernels gives the reference's results: the PLE
convolution runs through the same causal-conv kernels as GDN with a dilated kernel expanded
to zero taps (K' = (K - 1) x ngram_size + 1), in the prompt and decode workspaces; QSA's
block scoring, sparse attention and block-key compression run on their Triton kernels."""

from __future__ import annotations

import copy

import pytest
import torch

from ignition.kernels import use_backend
from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors
from ignition.model.step import run_step
from tests.model.conftest import new_state
from tests.model.helpers import assert_states_equal, prefill

pytestmark = pytest.mark.slow

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def test_mixed_step_on_triton_matches_the_reference(qwen4_model):
    model = copy.deepcopy(qwen4_model).to(DEVICE)
    with use_backend("reference"):
        warm = new_state(model.config, device=DEVICE)
        prefill(model, warm, 0, [(13 * i + 9) % 4000 + 9 for i in range(19)])
    capacity = PackedCapacity.mixed(2, 2, 16)

    def run():
        state = warm.clone()
        rows = [[40, 41], list(range(100, 113))]
        inputs = PackedInputs.build(capacity, rows, [0, 1], prefill_row=1, device=DEVICE)
        out = run_step(model, state, inputs, capacity, SamplingTensors.greedy(2, DEVICE))
        return out.target.logits, state

    with use_backend("reference"):
        expected, expected_state = run()
    with use_backend("triton"):
        got, got_state = run()
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    # past the index budget (QSA selects blocks): the greedy tokens are unchanged too
    assert torch.equal(got.argmax(-1), expected.argmax(-1))
    assert_states_equal(got_state, expected_state, atol=1e-4)
