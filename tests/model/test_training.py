"""The batched training forward computes what the packed serving forward computes."""

from __future__ import annotations

import pytest
import torch

from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors
from ignition.model.step import run_step
from ignition.model.training import forward_train, training_losses
from ignition.model.weights import random_model
from tests.model.conftest import new_state

PROMPT_LEN = 50  # not a multiple of the 64-token GDN chunk, longer than the conv window
ATOL = 1e-4


@pytest.fixture(scope="module")
def prompt(config) -> list[int]:
    generator = torch.Generator().manual_seed(7)
    return torch.randint(4, config.vocab_size, (PROMPT_LEN,), generator=generator).tolist()


@pytest.fixture(scope="module")
def served(config, model, prompt):
    """Prefill of ``prompt`` in slot 1 through run_step: (step output, state)."""
    state = new_state(config)
    capacity = PackedCapacity.mixed(1, 1, 64)
    inputs = PackedInputs.build(capacity, [prompt], [1], prefill_row=0)
    with torch.no_grad():
        out = run_step(model, state, inputs, capacity, SamplingTensors.greedy(1))
    return out, state


def test_training_logits_equal_packed_forward_logits(model, prompt, served):
    out, _ = served
    with torch.no_grad():
        trained = forward_train(model, torch.tensor([prompt]))
    torch.testing.assert_close(trained.logits[0], out.target.logits[:PROMPT_LEN], atol=ATOL, rtol=0)


def test_training_mtp_logits_equal_the_served_draft_logits(model, prompt, served):
    out, state = served
    next_token = int(out.next_tokens[0])
    with torch.no_grad():
        trained = forward_train(model, torch.tensor([[*prompt, next_token]]))
        served_draft = model.draft_logits(state.mtp_hidden[1:2])[0]
    # The served MTP hidden of the last prompt position consumed the sampled token.
    torch.testing.assert_close(trained.mtp_logits[0, -1], served_draft, atol=ATOL, rtol=0)


def test_batch_rows_are_independent(config, model):
    generator = torch.Generator().manual_seed(3)
    tokens = torch.randint(0, config.vocab_size, (3, 70), generator=generator)
    with torch.no_grad():
        batched = forward_train(model, tokens)
        alone = forward_train(model, tokens[1:2])
    torch.testing.assert_close(batched.logits[1], alone.logits[0], atol=ATOL, rtol=0)
    torch.testing.assert_close(batched.mtp_logits[1], alone.mtp_logits[0], atol=ATOL, rtol=0)


def test_mtp_logits_are_one_position_shorter(config, model):
    with torch.no_grad():
        out = forward_train(model, torch.zeros(2, 9, dtype=torch.int64))
    assert out.logits.shape == (2, 9, config.vocab_size)
    assert out.mtp_logits.shape == (2, 8, config.vocab_size)


def test_token_ids_must_be_a_batch_of_rows(model):
    with pytest.raises(ValueError, match=r"\[batch, tokens\]"):
        forward_train(model, torch.zeros(9, dtype=torch.int64))


def test_twenty_training_steps_lower_both_losses(config):
    torch.manual_seed(0)
    model = random_model(config, seed=1).train()
    pattern = torch.arange(4, 4 + 24).repeat(3)[None, :]  # a fixed periodic text
    batch = torch.cat([pattern, pattern.roll(5, dims=1)])  # [2, 72]
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    first: tuple[float, float] | None = None
    for _ in range(20):
        losses = training_losses(model, batch)
        first = first or (float(losses.lm.detach()), float(losses.mtp.detach()))
        optimizer.zero_grad()
        losses.total.backward()
        optimizer.step()
    with torch.no_grad():
        last = training_losses(model, batch)
    assert float(last.lm) < 0.8 * first[0]
    assert float(last.mtp) < 0.8 * first[1]


def test_every_trained_parameter_gets_a_gradient(config):
    model = random_model(config, seed=2).train()
    tokens = torch.randint(
        0, config.vocab_size, (2, 64), generator=torch.Generator().manual_seed(0)
    )
    training_losses(model, tokens).total.backward()
    missing = [name for name, p in model.named_parameters() if p.grad is None]
    assert missing == []
