"""Detect, on any device, operations a captured CUDA graph cannot contain.

Host reads of device values, data-dependent shapes and host data brought into a program
raise :class:`HostSyncError` on CPU too, so CI checks every program without a GPU. Kernel
references are recorded in ``exempted`` unless ``check_kernel_references=True``. Why two
torch modes: docs/compiler.md.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from ignition.model import sampling

aten = torch.ops.aten


class HostSyncError(RuntimeError):
    """An operation that would synchronize with the host or break a CUDA-graph capture."""


_HOST_READS = {
    torch.Tensor.item: ".item()",
    torch.Tensor.tolist: ".tolist()",
    torch.Tensor.__int__: "int(tensor)",
    torch.Tensor.__float__: "float(tensor)",
    torch.Tensor.__bool__: "bool(tensor) (a Python branch on a tensor)",
    torch.Tensor.__index__: "a tensor used as a Python index or size",
    torch.Tensor.numpy: ".numpy()",
    torch.Tensor.__array__: "a tensor converted to a NumPy array",
}
_HOST_DATA = {torch.tensor: "torch.tensor(...)", torch.as_tensor: "torch.as_tensor(...)"}

_DATA_DEPENDENT_SHAPE = {
    aten.nonzero.default: "nonzero (data-dependent shape)",
    aten.masked_select.default: "masked_select (data-dependent shape)",
    aten.bincount.default: "bincount (size from the data's maximum)",
    aten._unique2.default: "unique (data-dependent shape)",
    aten.unique_dim.default: "unique (data-dependent shape)",
    aten.unique_consecutive.default: "unique_consecutive (data-dependent shape)",
    aten._local_scalar_dense.default: "a device value read on the host",
    aten.is_nonzero.default: "bool(tensor) (a Python branch on a tensor)",
    aten.equal.default: "torch.equal (returns a host bool)",
    aten.allclose.default: "torch.allclose (returns a host bool)",
}


def _has_bool_index(indices: Any) -> bool:
    return any(
        isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices or ()
    )


def _dispatch_violation(func: Any, args: tuple, kwargs: dict) -> str | None:
    if func in _DATA_DEPENDENT_SHAPE:
        return _DATA_DEPENDENT_SHAPE[func]
    packet = getattr(func, "overloadpacket", None)
    if func is aten.repeat_interleave.Tensor and (
        kwargs.get("output_size", args[1] if len(args) > 1 else None) is None
    ):
        return "repeat_interleave without output_size (data-dependent shape)"
    indexing = (aten.index, aten.index_put, aten.index_put_, aten._index_put_impl_)
    if packet in indexing and _has_bool_index(args[1] if len(args) > 1 else kwargs.get("indices")):
        return "boolean-mask indexing (data-dependent shape)"
    if packet is aten.histc and args[2:4] in ((0, 0), (0.0, 0.0)) and len(args) >= 4:
        return "histc without a range (reads the data's min and max)"
    return None


_HERE = Path(__file__).resolve()
_PACKAGE = _HERE.parent.parent


def _caller() -> tuple[str, bool]:
    """(innermost ignition source line outside this module, whether it is a kernel reference)."""
    for frame in reversed(traceback.extract_stack()):
        path = Path(frame.filename).resolve()
        if path != _HERE and _PACKAGE in path.parents:
            relative = path.relative_to(_PACKAGE)
            is_reference = relative.parts[0] == "kernels" and path.name == "reference.py"
            return f"{path.relative_to(_PACKAGE.parent)}:{frame.lineno}", is_reference
    return "<outside ignition>", False


class _FunctionLayer(TorchFunctionMode):
    def __init__(self, on_violation: Callable[[str], None]) -> None:
        super().__init__()
        self.on_violation = on_violation

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _HOST_READS:
            self.on_violation(_HOST_READS[func])
        elif func in _HOST_DATA and args and not isinstance(args[0], torch.Tensor):
            self.on_violation(f"{_HOST_DATA[func]} of host data inside a program")
        elif func is torch.Tensor.__getitem__ and len(args) > 1:
            index = args[1] if isinstance(args[1], tuple) else (args[1],)
            if _has_bool_index(index):
                self.on_violation("boolean-mask indexing (data-dependent shape)")
        elif func is torch.Tensor.__setitem__ and len(args) > 1:
            index = args[1] if isinstance(args[1], tuple) else (args[1],)
            if _has_bool_index(index):
                self.on_violation("boolean-mask assignment (syncs on CUDA)")
        return func(*args, **kwargs)


class _DispatchLayer(TorchDispatchMode):
    def __init__(self, on_violation: Callable[[str], None]) -> None:
        super().__init__()
        self.on_violation = on_violation

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        violation = _dispatch_violation(func, args, kwargs)
        if violation is not None:
            self.on_violation(violation)
        return func(*args, **kwargs)


class HostSyncDetector:
    """Context manager: raise :class:`HostSyncError` at the first capture-unsafe operation,
    or (``raise_on_violation=False``) collect them in ``violations``."""

    def __init__(
        self,
        where: str = "program",
        raise_on_violation: bool = True,
        check_kernel_references: bool = False,
    ) -> None:
        self.where = where
        self.raise_on_violation = raise_on_violation
        self.check_kernel_references = check_kernel_references
        self.violations: list[str] = []
        self.exempted: list[str] = []

    def _on_violation(self, what: str) -> None:
        line, is_reference = _caller()
        what = f"{what} at {line}"
        if is_reference and not self.check_kernel_references:
            self.exempted.append(what)
            return
        self.violations.append(what)
        if self.raise_on_violation:
            raise HostSyncError(f"{self.where}: {what}; a captured graph cannot contain it")

    def __enter__(self) -> HostSyncDetector:
        # Run every sampler path, as on a GPU, so that is what is checked.
        self._skipped = sampling.SKIP_UNUSED_PATHS
        sampling.SKIP_UNUSED_PATHS = False
        self._function = _FunctionLayer(self._on_violation)
        self._dispatch = _DispatchLayer(self._on_violation)
        self._function.__enter__()
        self._dispatch.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._dispatch.__exit__(*exc)
        self._function.__exit__(*exc)
        sampling.SKIP_UNUSED_PATHS = self._skipped
