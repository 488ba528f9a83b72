"""Compile every Triton kernel for a CUDA target without a GPU (run as a script, not a test).

The interpreter accepts code that the real compiler rejects, so the tests also compile each
kernel to a cubin for sm_90 with the argument types and constexprs its launcher really passes.
Launches are intercepted (the kernel object is swapped for a recorder) so no GPU is needed.
Must run in a process where TRITON_INTERPRET is unset: interpreted and compiled kernels cannot
share a process. Prints one line per compiled kernel; exits non-zero on the first failure.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas")


def signature_of(arg_names: list[str], args: tuple[Any, ...], kwargs: dict[str, Any]):
    """Triton's own specialization of each argument (an int equal to 1 becomes a constexpr)."""
    from triton.backends.compiler import BaseBackend
    from triton.runtime.jit import native_specialize_impl

    signature, constexprs = {}, {}
    for name, value in zip(arg_names, args, strict=False):
        kind, _ = native_specialize_impl(BaseBackend, value, False, True, True)
        signature[name] = kind
        if kind == "constexpr":
            constexprs[name] = value
    for name, value in kwargs.items():
        if name in LAUNCH_OPTIONS:
            continue
        signature[name] = "constexpr"
        constexprs[name] = value
    return signature, constexprs


class LaunchRecorder:
    """Stands in for a JITFunction: ``kernel[grid](*args)`` records instead of launching."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.launches: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def __getitem__(self, grid):
        def record(*args, **kwargs):
            self.launches.append((args, kwargs))

        return record


def compile_launches(module, kernel_name: str, call: Callable[[], Any]) -> None:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    kernel = getattr(module, kernel_name)
    recorder = LaunchRecorder(kernel)
    setattr(module, kernel_name, recorder)
    try:
        call()
    finally:
        setattr(module, kernel_name, kernel)
    if not recorder.launches:
        raise RuntimeError(f"{kernel_name} was never launched by its public function")
    for args, kwargs in recorder.launches:
        signature, constexprs = signature_of(kernel.arg_names, args, kwargs)
        source = ASTSource(kernel, signature, constexprs=constexprs)
        started = time.perf_counter()
        options = {name: kwargs[name] for name in LAUNCH_OPTIONS if name in kwargs}
        compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)
        dtypes = sorted({v for v in signature.values() if v.startswith("*")})
        seconds = time.perf_counter() - started
        print(f"compiled {kernel_name} {dtypes} shared={compiled.metadata.shared} {seconds:.1f}s")


def main() -> None:
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        raise SystemExit("run without TRITON_INTERPRET")
    sys.path.insert(0, os.path.dirname(__file__))
    from kernel_launch_cases import launch_cases

    only = set(sys.argv[1:])
    for module, kernel_name, call in launch_cases():
        if not only or kernel_name in only:
            compile_launches(module, kernel_name, call)


if __name__ == "__main__":
    main()
