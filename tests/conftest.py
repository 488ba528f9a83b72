"""Suite-wide settings."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def cpu_thread_policy():
    """Every test runs under the runtime's CPU policy: one torch thread (see
    ignition/compiler/device.py for why, with measurements). Tests that never touch torch
    pay nothing: torch is imported only here, once."""
    import torch

    from ignition.compiler.device import configure_threads

    previous = torch.get_num_threads()
    configure_threads(torch.device("cpu"), None)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def vision_case(tmp_path_factory):
    """Issue 13's end-to-end case: a built bundle of a random tiny Qwen3.5 with vision,
    transformers' greedy answer to a two-image prompt, the expanded prompt, its images and
    the tokenizer (tests/server/vision_checkpoint.py)."""
    pytest.importorskip("transformers")
    from tests.server.vision_checkpoint import build_vision_case

    return build_vision_case(tmp_path_factory)
