"""Kernel tests run the Triton kernels through the interpreter when no GPU is present.

triton reads TRITON_INTERPRET when a kernel is decorated, i.e. when an op's triton module is
first imported; the dispatcher imports those modules lazily, so setting the variable while this
conftest loads (before any test runs) is early enough.
"""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture
def device() -> torch.device:
    """Where Triton-vs-reference comparisons run: the GPU if present, else the interpreter."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
