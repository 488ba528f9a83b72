"""Static-buffer programs: captured as CUDA graphs on a GPU, run eagerly on CPU.

A program is a function of typed static input buffers that returns its outputs.
Callers write inputs in place, call :meth:`PreparedProgram.run`, and read the
outputs in place, so the same host code drives a CUDA-graph replay and an eager
CPU run. The capture discipline follows the usual serving-engine recipe: warm
up once outside the graph (allocator and autotuning side effects), capture
largest program first so that smaller ones reuse its memory, and share one pool
across every graph of a catalog.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import torch

Tree = Any  # a Tensor, or a dataclass / tuple / list / dict of trees


def map_tensors(tree: Tree, fn: Callable[[torch.Tensor], Any]) -> Tree:
    """Apply ``fn`` to every tensor leaf, rebuilding the same structure."""
    if isinstance(tree, torch.Tensor):
        return fn(tree)
    if dataclasses.is_dataclass(tree) and not isinstance(tree, type):
        values = {f.name: map_tensors(getattr(tree, f.name), fn) for f in dataclasses.fields(tree)}
        return dataclasses.replace(tree, **values)
    if isinstance(tree, tuple):
        return tuple(map_tensors(item, fn) for item in tree)
    if isinstance(tree, list):
        return [map_tensors(item, fn) for item in tree]
    if isinstance(tree, dict):
        return {key: map_tensors(value, fn) for key, value in tree.items()}
    return tree


def copy_into(dst: Tree, src: Tree) -> None:
    """Copy every tensor of ``src`` into the matching static tensor of ``dst``."""
    if isinstance(dst, torch.Tensor):
        if not isinstance(src, torch.Tensor) or src.shape != dst.shape:
            got = tuple(src.shape) if isinstance(src, torch.Tensor) else type(src).__name__
            raise ValueError(f"static output shape {tuple(dst.shape)} received {got}")
        dst.copy_(src)
    elif dataclasses.is_dataclass(dst) and not isinstance(dst, type):
        for f in dataclasses.fields(dst):
            copy_into(getattr(dst, f.name), getattr(src, f.name))
    elif isinstance(dst, (tuple, list)):
        for d, s in zip(dst, src, strict=True):
            copy_into(d, s)
    elif isinstance(dst, dict):
        for key, value in dst.items():
            copy_into(value, src[key])


def tree_nbytes(tree: Tree) -> int:
    total = 0

    def add(t: torch.Tensor) -> None:
        nonlocal total
        total += t.numel() * t.element_size()

    map_tensors(tree, add)
    return total


@dataclasses.dataclass
class PreparedProgram:
    """One prepared physical program over its static inputs and outputs.

    ``graph`` is set when the program was captured (CUDA); otherwise ``run``
    calls the function eagerly and copies its results into ``outputs``, so the
    caller sees the same buffers either way.
    """

    name: str
    fn: Callable[[Tree], Tree]
    inputs: Tree
    outputs: Tree
    graph: Any = None
    capture_bytes: int = 0

    @property
    def is_captured(self) -> bool:
        return self.graph is not None

    def run(self) -> Tree:
        if self.graph is not None:
            self.graph.replay()
        elif self.outputs is None:
            # Eager programs allocate their output buffers on the first run, so loading a
            # catalog on CPU costs no warm-up; later runs write into the same buffers.
            self.outputs = map_tensors(self.fn(self.inputs), lambda t: t.clone())
        else:
            copy_into(self.outputs, self.fn(self.inputs))
        return self.outputs


class GraphCapturer:
    """Prepares programs on one device; on CUDA all graphs share one memory pool.

    Capture order matters for the pool: prepare the largest program first (the
    build pipeline sorts by packed extent) so later, smaller graphs fit inside
    the blocks it already reserved.
    """

    def __init__(self, device: torch.device | str, use_graphs: bool | None = None) -> None:
        self.device = torch.device(device)
        is_cuda = self.device.type == "cuda"
        self.use_graphs = is_cuda if use_graphs is None else (use_graphs and is_cuda)
        self._pool: Any = None

    def prepare(self, name: str, fn: Callable[[Tree], Tree], inputs: Tree) -> PreparedProgram:
        """Warm up and capture (CUDA), or keep the eager function (CPU, no warm-up)."""
        if not self.use_graphs:
            return PreparedProgram(name, fn, inputs, outputs=None)
        with torch.no_grad():
            fn(inputs)  # warm-up outside the graph: allocator and autotuning side effects
            torch.cuda.synchronize(self.device)
            before = torch.cuda.memory_reserved(self.device)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self._pool):
                outputs = fn(inputs)
            if self._pool is None:
                self._pool = graph.pool()
            torch.cuda.synchronize(self.device)
            used = torch.cuda.memory_reserved(self.device) - before
        return PreparedProgram(name, fn, inputs, outputs, graph=graph, capture_bytes=max(0, used))


def timed_run(program: PreparedProgram) -> tuple[Tree, int]:
    """Run once and return (outputs, device interval in ns).

    On CUDA the interval comes from events around the replay (the device time
    Helios learns from); on CPU it is the wall interval of the eager run.
    """
    if program.is_captured:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        outputs = program.run()
        end.record()
        end.synchronize()
        return outputs, int(start.elapsed_time(end) * 1e6)
    began = time.perf_counter_ns()
    outputs = program.run()
    return outputs, time.perf_counter_ns() - began
