"""The model gives the reference's results when its ops run on the Triton kernels.

On a machine without a GPU the kernels run through the Triton interpreter (slow, so these are
marked slow); with a GPU the same tests run on CUDA.
"""

from __future__ import annotations

import copy

import pytest
import torch

from ignition.kernels import use_backend
from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors
from ignition.model.speculative import RoundCapacity, RoundInputs, speculative_round
from ignition.model.step import run_step
from tests.model.conftest import new_state
from tests.model.helpers import assert_states_equal, prefill

pytestmark = pytest.mark.slow

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
LOGITS_TOLERANCE = dict(atol=1e-4, rtol=1e-4)
STATE_TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def device_model(model):
    return copy.deepcopy(model).to(DEVICE)


@pytest.fixture(scope="module")
def warm_state(config, device_model):
    with use_backend("reference"):
        state = new_state(config, device=DEVICE)
        prefill(device_model, state, 1, [2, 3, 4, 5, 6, 7, 8, 9, 10])
        prefill(device_model, state, 2, [30, 31])
        prefill(device_model, state, 3, list(range(50, 70)))
    return state


def _both_backends(run):
    with use_backend("reference"):
        expected = run()
    with use_backend("triton"):
        got = run()
    return expected, got


def test_mixed_step_on_triton_matches_the_reference(device_model, warm_state):
    capacity = PackedCapacity.mixed(4, 3, 64)

    def run():
        state = warm_state.clone()
        inputs = PackedInputs.build(
            capacity,
            [[40, 41, 42], list(range(11, 24)), [7], [99, 98]],
            [1, 0, 2, 3],
            prefill_row=1,
            device=DEVICE,
        )
        out = run_step(device_model, state, inputs, capacity, SamplingTensors.greedy(4, DEVICE))
        return out, state

    (expected, expected_state), (got, got_state) = _both_backends(run)
    torch.testing.assert_close(got.target.logits, expected.target.logits, **LOGITS_TOLERANCE)
    assert got.next_tokens.tolist() == expected.next_tokens.tolist()
    assert_states_equal(got_state, expected_state, atol=STATE_TOLERANCE)


@pytest.mark.parametrize("greedy", [True, False], ids=["greedy", "sampled"])
def test_speculative_round_on_triton_matches_the_reference(device_model, warm_state, greedy):
    capacity = RoundCapacity(batch_capacity=4, proposal_depth=3, verify_width=4, packed_capacity=9)
    temperature = 0.0 if greedy else 1.0

    def run():
        state = warm_state.clone()
        inputs = RoundInputs(
            pending_tokens=torch.tensor([0, 12, 13, 14], device=DEVICE),
            slot_ids=torch.tensor([-1, 1, 2, 3], dtype=torch.int32, device=DEVICE),
            lane_ceilings=torch.full((4,), 4, dtype=torch.int32, device=DEVICE),
        )
        params = SamplingTensors.build([temperature] * 4, seed=[1, 2, 3, 4], device=DEVICE)
        return speculative_round(device_model, state, inputs, capacity, params, greedy), state

    (expected, expected_state), (got, got_state) = _both_backends(run)
    assert got.query_lens.tolist() == expected.query_lens.tolist()
    assert got.output_tokens.tolist() == expected.output_tokens.tolist()
    torch.testing.assert_close(got.confidence, expected.confidence, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got.survival, expected.survival, atol=1e-5, rtol=1e-5)
    assert_states_equal(got_state, expected_state, atol=STATE_TOLERANCE)
