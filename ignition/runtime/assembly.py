"""Start-up in one downward pass: bundle, state, programs, executors, scheduler, engine."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from ignition.compiler.graph import GraphCapturer, PreparedProgram, prepare_programs
from ignition.compiler.state_ops import SnapshotStore, StateOperations
from ignition.components.mode_selection import select_for_mode
from ignition.components.catalog import Catalog
from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.components.state_programs import STATE_PROGRAMS
from ignition.helios import (
    PolicyConfig,
    Resources,
    SchedulerFactory,
    SpeculationMode,
    helios_scheduler,
)
from ignition.model.model import HybridModel
from ignition.model.prompt_logprobs import score_positions
from ignition.model.state import ModelState, index_key_dtype
from ignition.runtime.executors.frames import Worker
from ignition.runtime.executors.resources import SlotResources
from ignition.runtime.executors.worker import ModelWorker
from ignition.runtime.grammar import GrammarCompiler, LazyGrammarCompiler
from ignition.runtime.loop.engine import Engine
from ignition.runtime.loop.faults import FaultPlan
from ignition.runtime.loop.faults import install as install_faults
from ignition.runtime.loop.proposal_hooks import DraftOffers
from ignition.runtime.loop.second_slot import DEFAULT_QUEUE_LEAD_MS, lead_ns_from_ms
from ignition.runtime.loop.stats import EngineStats
from ignition.runtime.loop.window_hooks import VisionWindowHooks, WindowRows
from ignition.runtime.proposals.copy_proposals import PromptLookup
from ignition.runtime.proposals.registry import Proposals
from ignition.runtime.requests.detokenize import TextDecoder
from ignition.runtime.retention.captures import default_snapshot_rows
from ignition.runtime.retention.checkpoints import CheckpointCache
from ignition.runtime.tracing.hook import install_trace_hook
from ignition.runtime.tracing.recorder import TraceRecorder
from ignition.runtime.vision.binding import image_encoder

log = logging.getLogger("ignition.engine")


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
    # Restores and captures must save more prefill time than they cost (False: keep all).
    checkpoint_payoff: bool = True
    # Retained-checkpoint rows; 0 turns retention off. None: ROWS_PER_SLOT per request slot,
    # fewer on a GPU where they would take more than half the memory left after the state.
    snapshot_rows: int | None = 4
    # KV pages requests may own; None: enough for every slot to reach the context limit.
    # Fewer makes requests compete for pages (a full pool preempts, see loop/preemption.py).
    num_pages: int | None = None
    # Vision models: features one request's active vision window may hold (0: as many as
    # the largest prompt chunk), and private snapshot rows for multi-window requests.
    vision_feature_capacity: int = 0
    vision_window_rows: int = 1
    # Storage of QSA's compressed index keys: "auto" (the model's dtype), "bf16" or "fp8"
    # (e4m3, half of bf16's bytes; model.state.INDEX_KEY_DTYPES). Models without QSA
    # layers hold no index keys, so for them it changes nothing.
    indexer_kv_dtype: str = "auto"
    # Copy proposals' search (proposals/copy_proposals.py; vLLM's prompt_lookup_max/min).
    prompt_lookup: PromptLookup = field(default_factory=PromptLookup)
    # MTP drafts from logits processed as the target's are (penalties, bias, min_tokens);
    # False drafts from the raw logits: the output is the same, acceptance falls (issue 15).
    drafts_from_processed_logits: bool = True
    # The just-in-time second frame slot (loop/second_slot.py): with one frame in flight,
    # plan the next this long before it is expected to end, not at once; None: at once.
    # Only workers that can tell a frame's end without waiting (CUDA) hold the slot.
    queue_lead_ms: float | None = DEFAULT_QUEUE_LEAD_MS


def selected_programs(catalog: Catalog, options: RuntimeOptions) -> Catalog:
    """The bundle's programs this start-up prepares: its speculation mode's, mixed or not."""
    return select_for_mode(catalog, options.speculation, mixed=options.mixed)


def state_for(
    model: HybridModel, catalog: Catalog, options: RuntimeOptions, device: torch.device
) -> tuple[ModelState, int, int]:
    """Size the caches: every slot can reach the context limit plus one round's lookahead."""
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
        # A lookahead's pages more per slot than Helios counts: the worker's write extent.
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
        index_key_dtype=index_key_dtype(options.indexer_kv_dtype),
    )
    return state, num_pages, device_pages


def resolve_snapshot_rows(options: RuntimeOptions, state: ModelState, device: torch.device) -> int:
    """The default row count: ROWS_PER_SLOT per slot, capped on CUDA at half the free memory."""
    if options.snapshot_rows is not None:
        return options.snapshot_rows
    rows = default_snapshot_rows(options.num_slots)
    if device.type == "cuda":
        free_bytes, _ = torch.cuda.mem_get_info(device)
        fits = int(0.5 * free_bytes) // max(1, SnapshotStore.row_bytes(state))
        if fits < rows:
            log.warning("snapshot rows: %d fit in half the free memory (default %d)", fits, rows)
            rows = fits
    return rows


def assemble_worker(
    model: HybridModel,
    catalog: Catalog,
    eos_token_ids: Sequence[int],
    options: RuntimeOptions,
    *,
    on_prepared: Callable[[Descriptor, PreparedProgram], None] | None = None,
    before_capture: Callable[[Any], None] | None = None,
) -> tuple[ModelWorker, Catalog, int, VisionWindowHooks]:
    """The worker over sized state and prepared programs, with the catalog, pages and windows."""
    device = next(model.parameters()).device
    selected = selected_programs(catalog, options)
    if options.max_context_tokens > model.config.max_position_embeddings:
        raise ValueError(
            f"max_context_tokens {options.max_context_tokens} exceeds the model's "
            f"max_position_embeddings {model.config.max_position_embeddings}"
        )
    if options.indexer_kv_dtype != "auto" and model.config.qsa_indexer is None:
        log.info("indexer_kv_dtype %s: the model has no QSA indexer", options.indexer_kv_dtype)
    state, num_pages, device_pages = state_for(model, selected, options, device)
    programs, _pending = prepare_programs(
        model,
        state,
        selected.descriptors,
        device,
        use_graphs=options.use_graphs,
        on_prepared=on_prepared,
        before_capture=before_capture,
        drafts_from_processed_logits=options.drafts_from_processed_logits,
    )
    snapshot_rows = resolve_snapshot_rows(options, state, device)
    retained_rows = max(1, snapshot_rows)
    window_rows = options.vision_window_rows if model.visual is not None else 0
    state_ops = StateOperations(
        state,
        num_rows=retained_rows + window_rows,
        capturer=GraphCapturer(device, options.use_graphs),
    )
    staging = next(iter(programs.values()))[0].staging
    resources = SlotResources(state, device_pages, page_table=staging.mirrors["page_table"])
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
        snapshot_rows=snapshot_rows,
        score_prompt=functools.partial(score_positions, model.project),
        prompt_lookup=options.prompt_lookup,
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
    before_capture: Callable[[Any], None] | None = None,
    attach_worker: Callable[[ModelWorker], None] | None = None,
    vocab_size: int | None = None,
    grammar: GrammarCompiler | LazyGrammarCompiler | None = None,
    trace: TraceRecorder | None = None,
    faults: FaultPlan | None = None,
) -> Engine:
    """``attach_worker`` gets the worker once built, ``wrap_worker`` wraps it; ``grammar``,
    ``trace`` and ``faults`` (None: none) are attached here."""
    model_worker, selected, num_pages, windows = assemble_worker(
        model, catalog, eos_token_ids, options, on_prepared=on_prepared,
        before_capture=before_capture,
    )  # fmt: skip
    if attach_worker is not None:
        attach_worker(model_worker)
    worker: Worker = model_worker if wrap_worker is None else wrap_worker(model_worker)
    mode = SpeculationMode.FIXED if options.speculation == "fixed" else SpeculationMode.ADAPTIVE
    resources = Resources(
        num_request_slots=options.num_slots, num_pages=num_pages, page_size_tokens=options.page_size
    )
    # Helios schedules the state programs (initialization, restore, snapshots) beside
    # inference; initialization and restores are prerequisites of a request's prompt.
    schedulable = replace(selected, descriptors=(*selected.descriptors, *STATE_PROGRAMS))
    scheduler = scheduler_factory(schedulable, options.policy, resources, mode)
    engine = Engine(
        scheduler,
        worker,
        decoder,
        max_context_tokens=options.max_context_tokens,
        max_waiting=options.max_waiting,
        stats=stats,
        checkpoints=CheckpointCache(
            model_worker.snapshot_rows,
            options.checkpoint_extra_work_fraction,
            payoff=options.checkpoint_payoff,
        ),
        vision_windows=windows,
        vocab_size=vocab_size,
        grammar=grammar,
        queue_lead_ns=lead_ns_from_ms(options.queue_lead_ms),
    )
    # host sources' draft counts, read by Helios after each of their frames published
    offers = DraftOffers(
        lambda: engine.scheduler, lambda: engine.live, Proposals(options.prompt_lookup)
    )
    engine.hooks.replace(DraftOffers, offers)
    if faults is not None:
        install_faults(engine, faults)
    if trace is not None:
        install_trace_hook(engine, trace)
    return engine
