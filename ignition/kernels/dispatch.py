"""Backend selection for kernel ops: ``use_backend(...)``, else ``IGNITION_KERNELS``, else
Triton for CUDA tensors; lazy imports keep triton out of reference runs."""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import torch

BACKENDS = ("triton", "reference")
ENV_VAR = "IGNITION_KERNELS"

_scoped_backend: ContextVar[str | None] = ContextVar("ignition_kernel_backend", default=None)


def _check_backend(name: str, source: str) -> str:
    if name not in BACKENDS:
        raise ValueError(
            f"unknown kernel backend {name!r} from {source}; expected one of {BACKENDS}"
        )
    return name


@contextmanager
def use_backend(name: str) -> Iterator[None]:
    """Force every op called inside the block onto backend ``name`` (``triton``/``reference``)."""
    token = _scoped_backend.set(_check_backend(name, "use_backend()"))
    try:
        yield
    finally:
        _scoped_backend.reset(token)


def current_backend() -> str | None:
    """The explicitly requested backend (context first, then env), or None for by-device."""
    scoped = _scoped_backend.get()
    if scoped is not None:
        return scoped
    from_env = os.environ.get(ENV_VAR, "").strip().lower()
    if from_env:
        return _check_backend(from_env, f"${ENV_VAR}")
    return None


def _first_tensor_device(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.device | None:
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            return value.device
    return None


def _check_triton_can_run(name: str, device: torch.device | None) -> None:
    """Triton runs CPU tensors only through its interpreter; say so instead of crashing."""
    if device is not None and device.type != "cuda" and not _interpreting():
        raise RuntimeError(
            f"kernel op {name!r} was sent to Triton with {device.type} tensors; set "
            "TRITON_INTERPRET=1 before the first Triton op runs, or use the reference backend"
        )


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


@dataclass(frozen=True)
class KernelOp:
    """One op: ``name`` is the function name in both modules of ``ignition/kernels/<folder>/``."""

    name: str
    folder: str
    has_triton: bool = True

    def implementation(self, backend: str) -> Callable[..., Any]:
        if backend == "triton" and not self.has_triton:
            raise NotImplementedError(f"kernel op {self.name!r} has no Triton implementation")
        module = importlib.import_module(f"ignition.kernels.{self.folder}.{backend}")
        return getattr(module, self.name)

    def select(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        requested = current_backend()
        if requested is not None:
            return requested
        device = _first_tensor_device(args, kwargs)
        on_cuda = device is not None and device.type == "cuda"
        return "triton" if on_cuda and self.has_triton else "reference"


REGISTRY: dict[str, KernelOp] = {}


def register(op: KernelOp) -> Callable[..., Any]:
    """Register ``op``; its dispatcher carries the reference's name and docstring."""
    if op.name in REGISTRY:
        raise ValueError(f"kernel op {op.name!r} is registered twice")
    REGISTRY[op.name] = op
    reference = op.implementation("reference")

    @functools.wraps(reference)
    def dispatched(*args: Any, **kwargs: Any) -> Any:
        backend = op.select(args, kwargs)
        if backend == "triton":
            _check_triton_can_run(op.name, _first_tensor_device(args, kwargs))
        return op.implementation(backend)(*args, **kwargs)

    return dispatched
