"""Issue 31: the batched training forward of Qwen3.8-Flash-Next (PLE over whole sequences,
QSA's indexer as a dense selection mask, gated hyper-connections, the MTP head on pre-mixer
streams) computes what the packed serving forward computes, past the index budget."""

from __future__ import annotations

import torch

from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors
from ignition.model.step import run_step
from ignition.model.training import forward_train, training_losses
from tests.model.conftest import new_state

PROMPT = [(37 * i + 11) % 4000 + 9 for i in range(38)]
PROMPT[6] = PROMPT[20] = 2  # EOS: n-gram segments restart
ATOL = 1e-4


@torch.no_grad()
def _served(model, prompt):
    state = new_state(model.config)
    capacity = PackedCapacity.mixed(1, 1, 64)
    inputs = PackedInputs.build(capacity, [prompt], [1], prefill_row=0)
    return run_step(model, state, inputs, capacity, SamplingTensors.greedy(1)), state


def test_training_logits_equal_packed_forward_logits(qwen4_model):
    out, _ = _served(qwen4_model, PROMPT)
    with torch.no_grad():
        trained = forward_train(qwen4_model, torch.tensor([PROMPT, PROMPT[::-1]]))
    torch.testing.assert_close(
        trained.logits[0], out.target.logits[: len(PROMPT)], atol=ATOL, rtol=0
    )


def test_training_mtp_logits_equal_the_served_draft_logits(qwen4_model):
    out, state = _served(qwen4_model, PROMPT)
    next_token = int(out.next_tokens[0])
    with torch.no_grad():
        trained = forward_train(qwen4_model, torch.tensor([[*PROMPT, next_token]]))
        served = qwen4_model.draft_logits(state.mtp_hidden[1:2])[0]
    torch.testing.assert_close(trained.mtp_logits[0, -1], served, atol=ATOL, rtol=0)


def test_training_losses_have_gradients_for_the_released_parts(qwen4_model):
    model = qwen4_model
    losses = training_losses(model, torch.tensor([PROMPT[:24]]))
    losses.total.backward()
    try:
        for name, param in model.named_parameters():
            is_trained = any(
                part in name
                for part in ("ple.ngram_embedding", "ple.conv1d", "attn_hc.", "hc_mixer.", "mtp.")
            )
            if is_trained and "indexer" not in name:
                assert param.grad is not None and bool(param.grad.abs().sum() > 0), name
    finally:
        model.zero_grad(set_to_none=True)
