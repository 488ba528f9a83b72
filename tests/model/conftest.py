"""Shared fixtures: the tiny config, a random model of it and a fresh paged state."""

from __future__ import annotations

import os

import pytest
import torch

from ignition.kernels import use_backend
from ignition.model.config import ModelConfig
from ignition.model.model import HybridModel
from ignition.model.state import ModelState, contiguous_pages
from ignition.model.weights import random_model

if not torch.cuda.is_available():
    # triton reads this when an op's triton module is first imported (lazily, at first use),
    # so the Triton-backend model tests run through the interpreter on CPU.
    os.environ.setdefault("TRITON_INTERPRET", "1")

NUM_SLOTS = 4
PAGE_SIZE = 8
MAX_PAGES_PER_SLOT = 8


@pytest.fixture(autouse=True)
def reference_kernels():
    """The model tests pin the reference kernels: they test the model, not the backends."""
    with use_backend("reference"):
        yield


@pytest.fixture(scope="session")
def config() -> ModelConfig:
    return ModelConfig.tiny()


@pytest.fixture(scope="session")
def model(config: ModelConfig) -> HybridModel:
    torch.manual_seed(0)
    return random_model(config, seed=0)


def new_state(
    config: ModelConfig, num_slots: int = NUM_SLOTS, device: torch.device | str = "cpu"
) -> ModelState:
    state = ModelState.allocate(
        config,
        num_slots=num_slots,
        num_pages=num_slots * MAX_PAGES_PER_SLOT,
        page_size=PAGE_SIZE,
        max_pages_per_slot=MAX_PAGES_PER_SLOT,
        device=device,
    )
    contiguous_pages(state)
    return state


@pytest.fixture
def state(config: ModelConfig) -> ModelState:
    return new_state(config)


@pytest.fixture(scope="session")
def qwen4_checkpoint(tmp_path_factory):
    """(path, transformers model) of a tiny random Qwen4ExpForCausalLM checkpoint with an MTP
    head (mtp.* tensors beside what transformers saves)."""
    pytest.importorskip("transformers")
    from tests.model.hf_checkpoints import write_qwen4_exp

    path = tmp_path_factory.mktemp("qwen4_exp")
    return path, write_qwen4_exp(path, mtp=True)


@pytest.fixture(scope="session")
def qwen4_model(qwen4_checkpoint):
    from ignition.model.weights import load_checkpoint

    return load_checkpoint(qwen4_checkpoint[0]).model
