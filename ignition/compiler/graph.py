"""Static-buffer programs: captured as CUDA graphs on a GPU, run eagerly on CPU.

Callers upload inputs in place, :func:`launch` a program and later :meth:`InflightRun.wait`,
so one host path drives a graph replay and an eager run. Capture goes largest first into one
shared pool (:func:`capture_order`); warm-up and capture run on all-padding inputs, which
mutate no request's state (docs/compiler.md).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from typing import Any

import torch

from ignition.compiler.buffers import WorkspaceExtents
from ignition.compiler.device import flushing_denormals
from ignition.compiler.programs import Program, build_program
from ignition.compiler.staging import HostStaging
from ignition.compiler.workspace import Workspace, clear_inputs
from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.model.logits_processing import SlotHistory
from ignition.model.model import HybridModel
from ignition.model.state import ModelState

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
    """Copy ``src`` into the static tensors of ``dst``; a None in ``src`` leaves them as is."""
    if src is None:
        return
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


def capture_order(descriptors: Iterable[Descriptor]) -> list[Descriptor]:
    """Largest packed extent first, then widest batch: the pure shape rule of the pool."""
    return sorted(descriptors, key=lambda d: (-d.max_packed_extent, -d.batch_capacity, d.name))


@dataclasses.dataclass
class PreparedProgram:
    """One prepared program's buffers: static inputs, static outputs and, on CUDA, its graph;
    an eager ``run`` copies into ``outputs``, so callers see the same buffers either way.

    ``run(needs_logprobs=False)``: an eager run skips logprobs (their outputs keep stale
    values the host reads only for rows that asked); a graph replays what it captured.
    """

    name: str
    fn: Callable[[Tree], Tree]
    inputs: Tree
    outputs: Tree
    graph: Any = None
    capture_bytes: int = 0
    capture_s: float = 0.0
    device: torch.device = dataclasses.field(default_factory=lambda: torch.device("cpu"))

    @property
    def is_captured(self) -> bool:
        return self.graph is not None

    def run(self, needs_logprobs: bool = True) -> Tree:
        if self.graph is not None:
            self.graph.replay()
            return self.outputs
        with flushing_denormals():  # eager: CPU arithmetic, see compiler/device.py
            return self._run_eager(needs_logprobs)

    def _run_eager(self, needs_logprobs: bool) -> Tree:
        if self.outputs is None:
            # Eager outputs are allocated on the first run and reused after.
            self.outputs = map_tensors(self.fn(self.inputs), lambda t: t.clone())
        elif needs_logprobs:
            copy_into(self.outputs, self.fn(self.inputs))
        else:
            copy_into(self.outputs, self.fn(self.inputs, needs_logprobs=False))
        return self.outputs


@dataclasses.dataclass
class InflightRun:
    """A launched program: its outputs become readable after :meth:`wait`."""

    outputs: Tree
    start: Any = None  # CUDA events around the replay; None on CPU
    end: Any = None
    cpu_ns: int = 0

    def is_done(self) -> bool:
        """Whether the device finished (without blocking; a CPU run finished at launch)."""
        return self.end is None or bool(self.end.query())

    def wait(self) -> int:
        """Block until the device finished; returns the device interval in ns."""
        if self.end is None:
            return self.cpu_ns
        self.end.synchronize()
        return int(self.start.elapsed_time(self.end) * 1e6)


def launch(
    program: PreparedProgram,
    snapshot: Callable[[Tree], Tree] | None = None,
    needs_logprobs: bool = True,
) -> InflightRun:
    """Enqueue one run (and ``snapshot`` of its outputs) without waiting for the device."""
    if program.device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        outputs = program.run(needs_logprobs)
        outputs = snapshot(outputs) if snapshot is not None else outputs
        end.record()
        return InflightRun(outputs, start, end)
    began = time.perf_counter_ns()
    outputs = program.run(needs_logprobs)
    outputs = snapshot(outputs) if snapshot is not None else outputs
    return InflightRun(outputs, cpu_ns=time.perf_counter_ns() - began)


def timed_run(program: PreparedProgram) -> tuple[Tree, int]:
    """Run once and wait: (outputs, device interval in ns)."""
    inflight = launch(program)
    return inflight.outputs, inflight.wait()


class GraphCapturer:
    """Prepares programs on one device; on CUDA all graphs share one memory pool, so
    prepare the largest first (:func:`capture_order`)."""

    def __init__(self, device: torch.device | str, use_graphs: bool | None = None) -> None:
        self.device = torch.device(device)
        is_cuda = self.device.type == "cuda"
        self.use_graphs = is_cuda if use_graphs is None else (use_graphs and is_cuda)
        self._pool: Any = None

    def prepare(self, name: str, fn: Callable[[Tree], Tree], inputs: Tree) -> PreparedProgram:
        """Warm up and capture (CUDA), or keep the eager function (CPU, no warm-up)."""
        if not self.use_graphs:
            return PreparedProgram(name, fn, inputs, outputs=None, device=self.device)
        began = time.perf_counter()
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
        return PreparedProgram(
            name,
            fn,
            inputs,
            outputs,
            graph=graph,
            capture_bytes=max(0, used),
            capture_s=time.perf_counter() - began,
            device=self.device,
        )


PreparedCatalog = dict[str, tuple[Program, PreparedProgram]]


def prepare_programs(
    model: HybridModel,
    state: ModelState,
    descriptors: Iterable[Descriptor],
    device: torch.device,
    *,
    use_graphs: bool | None = None,
    on_prepared: Callable[[Descriptor, PreparedProgram], None] | None = None,
    before_capture: Callable[[Any], None] | None = None,
    drafts_from_processed_logits: bool = True,
) -> tuple[PreparedCatalog, torch.Tensor]:
    """Every program of a catalog over one state, workspace and host staging, in capture
    order: (programs by descriptor name, the device ``pending`` buffer). ``before_capture``
    gets the shared PLE input before any capture (runtime.ple.in_graph binds it);
    ``drafts_from_processed_logits`` goes to every round program (build_program)."""
    ordered = capture_order(descriptors)
    text = [d for d in ordered if d.kind is not GraphKind.VISION]  # vision owns its inputs
    extents = WorkspaceExtents.of(text)
    if model.visual is not None:  # a chunk's image features never outnumber its tokens
        extents = dataclasses.replace(extents, max_image_tokens=extents.max_prompt)
    workspace = Workspace(extents, model.config.hidden_size, device, model.config.vocab_size)
    if before_capture is not None and (staged := workspace.ple_rows(model)) is not None:
        before_capture(staged)
    staging = HostStaging(workspace, mirrors={"page_table": state.page_table})
    pending = torch.zeros(state.num_slots + 1, dtype=torch.int64, device=device)
    history = SlotHistory.allocate(state.num_slots, model.config.vocab_size, device)
    capturer = GraphCapturer(device, use_graphs)
    prepared: PreparedCatalog = {}
    for d in ordered:
        program = build_program(
            d,
            model,
            state,
            workspace,
            pending,
            staging,
            history,
            drafts_from_processed_logits=drafts_from_processed_logits,
        )
        clear_inputs(program.inputs)
        graph = capturer.prepare(d.name, program.fn, program.inputs)
        prepared[d.name] = (program, graph)
        if on_prepared is not None:
            on_prepared(d, graph)
    return prepared, pending
