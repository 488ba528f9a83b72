"""Assemble a serving engine from a model and a catalog: state, programs, worker, Helios."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import torch

from ignition.compiler.graph import GraphCapturer, PreparedProgram, prepare_programs
from ignition.compiler.state_ops import RESTORE, SNAPSHOT, StateOperations
from ignition.components.capacity import select_for_mode
from ignition.components.catalog import Catalog, Descriptor, GraphKind
from ignition.helios import (
    PolicyConfig,
    Resources,
    SchedulerFactory,
    SpeculationMode,
    helios_scheduler,
)
from ignition.model.model import HybridModel
from ignition.model.state import ModelState
from ignition.runtime.checkpoints import CheckpointCache
from ignition.runtime.detokenize import TextDecoder
from ignition.runtime.engine import Engine
from ignition.runtime.resources import SlotResources
from ignition.runtime.stats import EngineStats
from ignition.runtime.worker import ModelWorker


@dataclass(frozen=True)
class RuntimeOptions:
    num_slots: int = 4
    page_size: int = 64
    max_context_tokens: int = 8192
    speculation: str = "adaptive"
    mixed: bool = True
    max_waiting: int = 64
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    use_graphs: bool | None = None
    checkpoint_extra_work_fraction: float = 0.05
    snapshot_rows: int = 4  # retained-checkpoint rows; 0 turns retention off
    # KV pages requests may own; None: enough for every slot to reach the context limit.
    # Fewer makes requests compete for pages (a full pool preempts, see preemption.py).
    num_pages: int | None = None


def state_for(
    model: HybridModel, catalog: Catalog, options: RuntimeOptions, device: torch.device
) -> tuple[ModelState, int]:
    """Size the caches: every slot can reach the context limit plus one round's lookahead.

    Returns the state, the number of pages requests may own (Helios's ledger) and the
    number the worker hands out; the state holds one more, the scratch page state
    operations redirect unassigned copies to.
    """
    lookahead = max(
        d.token_capacity + d.proposal_depth + 1
        for d in catalog.descriptors
        if d.kind not in (GraphKind.PREFILL, GraphKind.VISION)
    )
    per_slot = -(-(options.max_context_tokens + lookahead) // options.page_size)
    num_pages = per_slot * options.num_slots
    device_pages = num_pages
    if options.num_pages is not None:
        if options.num_pages < 1:
            raise ValueError(f"num_pages = {options.num_pages}: must be at least 1")
        num_pages = options.num_pages
        # Helios accounts pages for committed context plus each lane's reservation; the
        # worker covers a frame's whole write extent ahead of that (a non-final chunk's
        # lookahead token, a round's verification width plus draft storage), at most a
        # lookahead's pages more per slot. That slack keeps Helios's count binding.
        slack = -(-lookahead // options.page_size) + 1
        device_pages = num_pages + slack * options.num_slots
    state = ModelState.allocate(
        model.config,
        options.num_slots,
        device_pages + 1,
        options.page_size,
        per_slot,
        device=device,
        dtype=next(model.parameters()).dtype,
    )
    return state, num_pages, device_pages


def assemble_engine(
    model: HybridModel,
    catalog: Catalog,
    decoder: TextDecoder,
    eos_token_ids: Sequence[int],
    options: RuntimeOptions,
    *,
    stats: EngineStats | None = None,
    on_prepared: Callable[[Descriptor, PreparedProgram], None] | None = None,
    scheduler_factory: SchedulerFactory = helios_scheduler,
) -> Engine:
    device = next(model.parameters()).device
    selected = select_for_mode(catalog, options.speculation, mixed=options.mixed)
    if options.max_context_tokens > model.config.max_position_embeddings:
        raise ValueError(
            f"max_context_tokens {options.max_context_tokens} exceeds the model's "
            f"max_position_embeddings {model.config.max_position_embeddings}"
        )
    state, num_pages, device_pages = state_for(model, selected, options, device)
    programs, _pending = prepare_programs(
        model,
        state,
        selected.descriptors,
        device,
        use_graphs=options.use_graphs,
        on_prepared=on_prepared,
    )
    state_ops = StateOperations(
        state,
        num_rows=max(1, options.snapshot_rows),
        capturer=GraphCapturer(device, options.use_graphs),
    )
    staging = next(iter(programs.values()))[0].staging
    resources = SlotResources(state, device_pages, page_table=staging.mirrors["page_table"])
    worker = ModelWorker(state, programs, resources, frozenset(eos_token_ids), state_ops)
    mode = SpeculationMode.FIXED if options.speculation == "fixed" else SpeculationMode.ADAPTIVE
    resources = Resources(
        num_request_slots=options.num_slots, num_pages=num_pages, page_size_tokens=options.page_size
    )
    # Helios schedules the state programs (restore, snapshots) beside inference.
    schedulable = replace(selected, descriptors=(*selected.descriptors, SNAPSHOT, RESTORE))
    scheduler = scheduler_factory(schedulable, options.policy, resources, mode)
    return Engine(
        scheduler,
        worker,
        decoder,
        max_context_tokens=options.max_context_tokens,
        eos_token_ids=eos_token_ids,
        max_waiting=options.max_waiting,
        stats=stats,
        checkpoints=CheckpointCache(options.snapshot_rows, options.checkpoint_extra_work_fraction),
    )
