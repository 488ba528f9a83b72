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
