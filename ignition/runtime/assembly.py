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
from ignition.runtime.frames import Worker
from ignition.runtime.resources import SlotResources
from ignition.runtime.stats import EngineStats
from ignition.runtime.vision_binding import image_encoder
from ignition.runtime.window_engine import VisionWindowHooks, WindowRows
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
    # Vision models: features one request's active vision window may hold (0: as many as
    # the largest prompt chunk), and private snapshot rows for multi-window requests.
    vision_feature_capacity: int = 0
    vision_window_rows: int = 1


def state_for(
    model: HybridModel, catalog: Catalog, options: RuntimeOptions, device: torch.device
) -> tuple[ModelState, int]:
    """Size the caches: every slot can reach the context limit plus one round's lookahead.

    Returns the state and the number of pages requests may own; the state holds one more,
    the scratch page state operations redirect unassigned copies to.
    """
    lookahead = max(
        d.token_capacity + d.proposal_depth + 1
        for d in catalog.descriptors
        if d.kind not in (GraphKind.PREFILL, GraphKind.VISION)
    )
    per_slot = -(-(options.max_context_tokens + lookahead) // options.page_size)
    num_pages = per_slot * options.num_slots
    state = ModelState.allocate(
        model.config,
        options.num_slots,
        num_pages + 1,
        options.page_size,
        per_slot,
        device=device,
        dtype=next(model.parameters()).dtype,
    )
    return state, num_pages


def assemble_worker(
    model: HybridModel,
    catalog: Catalog,
    eos_token_ids: Sequence[int],
    options: RuntimeOptions,
    *,
    on_prepared: Callable[[Descriptor, PreparedProgram], None] | None = None,
) -> tuple[ModelWorker, Catalog, int, VisionWindowHooks]:
    """The worker over freshly sized state and prepared programs, the selected catalog, the
    pages requests may own and the vision-window hooks. Every tensor-parallel rank builds
    this part alike."""
    device = next(model.parameters()).device
    selected = select_for_mode(catalog, options.speculation, mixed=options.mixed)
    if options.max_context_tokens > model.config.max_position_embeddings:
        raise ValueError(
            f"max_context_tokens {options.max_context_tokens} exceeds the model's "
            f"max_position_embeddings {model.config.max_position_embeddings}"
        )
    state, num_pages = state_for(model, selected, options, device)
    programs, _pending = prepare_programs(
        model,
        state,
        selected.descriptors,
        device,
        use_graphs=options.use_graphs,
        on_prepared=on_prepared,
    )
    retained_rows = max(1, options.snapshot_rows)
    window_rows = options.vision_window_rows if model.visual is not None else 0
    state_ops = StateOperations(
        state,
        num_rows=retained_rows + window_rows,
        capturer=GraphCapturer(device, options.use_graphs),
    )
    staging = next(iter(programs.values()))[0].staging
    resources = SlotResources(state, num_pages, page_table=staging.mirrors["page_table"])
    feature_capacity = 0
    storage = None
    if model.visual is not None:
        # An image's span is prefilled in one chunk, so no window exceeds the largest one.
        largest_chunk = staging.workspace.extents.max_image_tokens
        feature_capacity = min(options.vision_feature_capacity or largest_chunk, largest_chunk)
        storage = torch.zeros(
            options.num_slots + 1,
            feature_capacity,
            model.config.hidden_size,
            device=device,
            dtype=next(model.parameters()).dtype,
        )
    worker = ModelWorker(
        state,
        programs,
        resources,
        frozenset(eos_token_ids),
        state_ops,
        encode_images=image_encoder(model, programs),
        feature_storage=storage,
    )
    windows = VisionWindowHooks(
        feature_capacity, WindowRows(retained_rows, window_rows) if window_rows else None
    )
    return worker, selected, num_pages, windows


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
    wrap_worker: Callable[[ModelWorker], Worker] | None = None,
) -> Engine:
    """``wrap_worker`` puts the worker behind another (rank zero's broadcasting worker)."""
    model_worker, selected, num_pages, windows = assemble_worker(
        model, catalog, eos_token_ids, options, on_prepared=on_prepared
    )
    worker: Worker = model_worker if wrap_worker is None else wrap_worker(model_worker)
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
        vision_windows=windows,
    )
