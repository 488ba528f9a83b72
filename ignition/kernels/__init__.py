"""Kernels: Triton ops beside same-signature PyTorch references (``ignition.kernels.ops``)."""

from __future__ import annotations

import importlib

from ignition.kernels.dispatch import BACKENDS, current_backend, use_backend

__all__ = ["BACKENDS", "current_backend", "ops", "use_backend"]


def __getattr__(name: str):
    if name == "ops":
        return importlib.import_module("ignition.kernels.ops")
    raise AttributeError(f"module 'ignition.kernels' has no attribute {name!r}")
