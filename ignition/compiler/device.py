"""Which device programs run on, and how many CPU threads torch may use there.

CPU defaults to one intra-op thread (spin-waiting between small kernels costs more than it
gains) and eager programs flush denormals (:func:`flushing_denormals`); measurements in
docs/cpu_profile.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


def resolve_device(requested: str | None) -> torch.device:
    """The requested device, else CUDA when available, else CPU."""
    return torch.device(requested or ("cuda" if torch.cuda.is_available() else "cpu"))


def configure_threads(device: torch.device, requested: int | None) -> int:
    """Apply the thread policy for ``device``; returns the intra-op thread count in force."""
    if requested is not None:
        if requested < 1:
            raise ValueError(f"--threads = {requested}: must be at least 1")
        torch.set_num_threads(requested)
    elif device.type == "cpu":
        torch.set_num_threads(1)
    return torch.get_num_threads()


@contextmanager
def flushing_denormals() -> Iterator[None]:
    """Flush denormals to zero on the calling thread for the block (x86 FTZ/DAZ; a no-op
    elsewhere), then restore: the flag is per thread, and code sharing the process keeps it."""
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)
