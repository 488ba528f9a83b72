"""Which device programs run on, and how many CPU threads torch may use there.

On CPU the default is one intra-op thread. The prepared programs of small
models are many small kernels, and OpenMP's default spin-waiting between them
can cost far more than the parallelism gains: on this project's 2-core CI
machine three 1024-token prefills of the embedded model take 0.18 s with one
thread, 16 s with two (0.22 s with two under OMP_WAIT_POLICY=PASSIVE). Ask for
more with ``--threads N`` (and set OMP_WAIT_POLICY=PASSIVE) on a bigger model.
The README's "CPU threads" note gives the command that reproduces these numbers.
"""

from __future__ import annotations

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
