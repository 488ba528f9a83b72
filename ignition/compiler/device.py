"""Which device programs run on, and how many CPU threads torch may use there.

On CPU the default is one intra-op thread. The prepared programs of small
models are many small kernels, and OpenMP's default spin-waiting between them
can cost far more than the parallelism gains: on this project's 2-core CI
machine three 1024-token prefills of the embedded model take 0.18 s with one
thread, 16 s with two (0.22 s with two under OMP_WAIT_POLICY=PASSIVE). Ask for
more with ``--threads N`` (and set OMP_WAIT_POLICY=PASSIVE) on a bigger model.
The README's "CPU threads" note gives the command that reproduces these numbers.

Eager CPU programs run with denormal floats flushed to zero (:func:`flushing_denormals`):
the gated delta rule's decays exp(G_i - G_j) reach the denormal range (below 1.2e-38)
within a chunk when a head decays fast, and x86 arithmetic on denormals is tens of times
slower; values that small never change an fp32 sum of ordinary terms.
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
    """Run the block with denormals flushed to zero on the calling thread (x86 FTZ/DAZ;
    a no-op where the CPU has no such mode), and switch that off again after it.

    Per block rather than once per process: the flag is a thread's (the engine may step on
    another thread than the one that loaded it), and code sharing the process (a test's
    reference model, transformers in ``benchmarks/vs_transformers.py``) keeps the default.
    Intra-op worker threads (``--threads`` above 1) keep theirs: torch offers no way to set
    it there, so only the calling thread's share of the work gains.
    """
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)
