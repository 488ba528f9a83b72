"""Kernels: Triton ops, each beside a PyTorch reference with the same signature.

Call ops through ``ignition.kernels.ops.<name>``: the dispatcher picks Triton for CUDA
inputs and the reference for CPU inputs; ``IGNITION_KERNELS=triton|reference`` or the
``use_backend`` context manager override that choice. Importing this package never imports
triton: a Triton module is imported on the first call that selects it, so CPU users without a
working triton still serve from the references.
"""

from __future__ import annotations

import importlib

from ignition.kernels.dispatch import BACKENDS, current_backend, use_backend

__all__ = ["BACKENDS", "current_backend", "ops", "use_backend"]


def __getattr__(name: str):
    if name == "ops":
        return importlib.import_module("ignition.kernels.ops")
    raise AttributeError(f"module 'ignition.kernels' has no attribute {name!r}")
