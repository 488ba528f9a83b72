"""Issue 31: the Qwen3.8-Flash-Next forward, commit, absorb and MTP drafts are free of host
syncs (a captured program cannot contain them): n-gram hashing, PLE, the QSA indexer's block
keys and selection, and the rings' commits (kernel references are exempt, as everywhere)."""

from __future__ import annotations

import torch

from ignition.compiler.host_sync import HostSyncDetector
from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors
from ignition.model.speculative import RoundCapacity, RoundInputs, speculative_round
from ignition.model.step import run_step
from tests.model.conftest import new_state
from tests.model.helpers import prefill

PROMPT = [(29 * i + 5) % 4000 + 9 for i in range(19)]


def test_a_mixed_step_and_a_speculative_round_make_no_host_sync(qwen4_model):
    state = new_state(qwen4_model.config)
    pending = prefill(qwen4_model, state, 0, PROMPT)
    capacity = PackedCapacity.mixed(2, 2, 16)
    inputs = PackedInputs.build(capacity, [[40, 41], PROMPT[:13]], [0, 1], prefill_row=1)
    params, round_params = SamplingTensors.greedy(2), SamplingTensors.greedy(1)
    with HostSyncDetector("qwen4_exp mixed step") as detector:
        run_step(qwen4_model, state, inputs, capacity, params)
    assert detector.violations == []
    lanes = RoundInputs(
        pending_tokens=torch.tensor([pending]),
        slot_ids=torch.tensor([0], dtype=torch.int32),
        lane_ceilings=torch.full((1,), 4, dtype=torch.int32),
    )
    with HostSyncDetector("qwen4_exp speculative round") as detector, torch.no_grad():
        speculative_round(
            qwen4_model,
            state,
            lanes,
            RoundCapacity(1, 3, 4, 4),
            round_params,
            greedy=True,
        )
    assert detector.violations == []
