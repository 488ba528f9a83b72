"""Prepare every program of a catalog over one model state and one workspace.

Programs are prepared largest packed extent first, so that on CUDA the first
capture reserves the pool blocks every later, smaller graph reuses. Each warm-up
and capture runs on all-padding inputs, which by the padding contract mutate no
request's state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

from ignition.compiler.capture import GraphCapturer, PreparedProgram
from ignition.compiler.programs import Program, build_program, clear_inputs
from ignition.compiler.workspace import Workspace, WorkspaceExtents
from ignition.components.catalog import Descriptor
from ignition.model.model import HybridModel
from ignition.model.state import ModelState

PreparedCatalog = dict[str, tuple[Program, PreparedProgram]]


def capture_order(descriptors: Iterable[Descriptor]) -> list[Descriptor]:
    return sorted(descriptors, key=lambda d: (-d.max_packed_extent, -d.batch_capacity, d.name))


def prepare_programs(
    model: HybridModel,
    state: ModelState,
    descriptors: Iterable[Descriptor],
    device: torch.device,
    *,
    use_graphs: bool | None = None,
    on_prepared: Callable[[Descriptor, PreparedProgram], None] | None = None,
) -> tuple[PreparedCatalog, torch.Tensor]:
    """Returns the prepared programs by descriptor name and the device ``pending`` buffer."""
    ordered = capture_order(descriptors)
    workspace = Workspace(WorkspaceExtents.of(ordered), model.config.hidden_size, device)
    pending = torch.zeros(state.num_slots + 1, dtype=torch.int64, device=device)
    capturer = GraphCapturer(device, use_graphs)
    prepared: PreparedCatalog = {}
    for d in ordered:
        program = build_program(d, model, state, workspace, pending)
        clear_inputs(program)
        graph = capturer.prepare(d.name, program.fn, program.inputs)
        prepared[d.name] = (program, graph)
        if on_prepared is not None:
            on_prepared(d, graph)
    return prepared, pending
