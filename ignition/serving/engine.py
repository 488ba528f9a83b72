"""Serve's options and the pass from a bundle to an :class:`Engine` (or this rank's shard).

``ServeOptions`` sits beside ``follow_engine``: followers receive their role as
``ServeOptions.follow`` (distributed/ never imports serving)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ignition.compiler.device import configure_threads, resolve_device
from ignition.direct.scheduler import direct_scheduler
from ignition.helios import PolicyConfig, helios_scheduler
from ignition.model.model import HybridModel
from ignition.model.weights import load_model
from ignition.recipes import INDEXER_KV_DTYPES
from ignition.runtime.assembly import (
    RuntimeOptions,
    assemble_engine,
    assemble_worker,
    selected_programs,
)
from ignition.runtime.bundle import Bundle, BundleError, load_bundle
from ignition.runtime.executors.worker import ModelWorker
from ignition.runtime.grammar import LazyGrammarCompiler
from ignition.runtime.loop.engine import Engine
from ignition.runtime.loop.second_slot import DEFAULT_QUEUE_LEAD_MS
from ignition.runtime.loop.stats import EngineStats
from ignition.runtime.ple.delivery import PleOptions
from ignition.runtime.ple.model import delivers_table
from ignition.runtime.ple.table import PleTableError
from ignition.runtime.proposals.copy_proposals import PromptLookup
from ignition.server.config import DEFAULT_MAX_REQUEST_BYTES
from ignition.serving.ple import built_ple, open_graph_rows, open_table, serve_ple_options

if TYPE_CHECKING:
    from ignition.distributed.context import TensorParallel
    from ignition.runtime.loop.faults import FaultPlan
    from ignition.runtime.tracing.recorder import TraceRecorder


@dataclass(frozen=True)
class ServeOptions:
    artifacts: str
    speculation: str | None = None
    mixed: bool = True
    max_context_tokens: int | None = None
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    max_waiting: int = 64
    device: str | None = None
    num_threads: int | None = None
    checkpoint_extra_work_fraction: float = 0.05
    checkpoint_payoff: bool = True  # retention_payoff.py; False keeps every restore and capture
    # Retained-checkpoint rows; None: 4 per request slot (runtime.assembly), 0: off.
    snapshot_rows: int | None = None
    num_pages: int | None = None  # KV pages requests may own; None: every slot reaches the context
    served_model_names: tuple[str, ...] = ()
    api_key: str | None = None
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    verify_weights: bool = False  # hash the checkpoint again instead of the stat check
    allowed_local_media_path: str | None = None  # image files chat requests may name
    vision_feature_capacity: int = 0  # 0: as many features as the largest prompt chunk
    ple: PleOptions = field(default_factory=PleOptions)  # the n-gram table (docs/ple.md)
    # Chat replies (server/tools/): None: the format the chat template renders, if any.
    tool_call_parser: str | None = None
    enable_auto_tool_choice: bool = False
    reasoning_parser: str | None = None
    # Request slots (--max-num-seqs); None: the bundle's. At most the slots it was built for.
    max_num_seqs: int | None = None
    chat_template: tuple[str, str] | None = None  # (source, text) replacing the bundle's
    metrics_names: str = "flare"  # "vllm": vllm:* aliases beside the flare_* metrics
    # QSA index-key storage (--indexer-kv-dtype auto|bf16|fp8); None: the bundle's
    indexer_kv_dtype: str | None = None
    # Proposal source when a request names none: "mtp", "ngram" or "both"
    # (runtime/proposals/registry.py).
    speculative_method: str = "mtp"
    # Copy proposals' search (--prompt-lookup-max/-min; vLLM's prompt_lookup_max/min).
    prompt_lookup: PromptLookup = field(default_factory=PromptLookup)
    # The just-in-time second frame slot (--scheduler-queue-lead-ms; None: at once).
    queue_lead_ms: float | None = DEFAULT_QUEUE_LEAD_MS
    # Trace-event JSON of the run (--trace-file), and the live GET /dashboard.
    trace_file: str | None = None
    dashboard: bool = True

    def follow(self, tp: TensorParallel) -> None:
        """Ranks 1..N-1 of a tensor-parallel group: the role ``distributed.launch`` runs."""
        follow_engine(self, tp)


@dataclass
class LoadListener:
    """What the CLI shows while loading: the bundle, then one tick per prepared program."""

    on_bundle: Callable[[Bundle, int], None] | None = None
    on_program: Callable[[str], None] | None = None


def load(options: ServeOptions, tp: TensorParallel | None) -> Bundle:
    """The bundle with the whole model, or rank ``tp.rank``'s shard; a table this rank
    delivers itself is left unread (docs/ple.md)."""
    configure_threads(resolve_device(options.device), options.num_threads)
    manifest = str(Path(options.artifacts) / "manifest.json")
    ple = serve_ple_options(options.ple, built_ple(options.artifacts), manifest)

    def load_model_of(path: Path, device: torch.device) -> HybridModel:
        try:
            skip = delivers_table(path, ple, device)
        except (PleTableError, ValueError) as err:
            raise BundleError(str(err)) from None
        if tp is None:
            return load_model(path, device, without_ple_tables=skip)
        from ignition.distributed.loading import load_sharded_checkpoint

        return load_sharded_checkpoint(path, tp, device, without_ple_tables=skip).model

    return load_bundle(
        options.artifacts,
        options.device,
        verify_weights=options.verify_weights,
        model_loader=load_model_of,
    )


def runtime_options(options: ServeOptions, bundle: Bundle) -> RuntimeOptions:
    """Serve's options checked against what the bundle was built for."""
    runtime = bundle.manifest["runtime"]
    speculation = options.speculation or runtime["speculation"]
    limit = bundle.model.config.max_position_embeddings
    context = options.max_context_tokens or min(limit, 8192)
    if context > limit:
        raise BundleError(
            f"--max-context = {context} exceeds {bundle.path}'s max_position_embeddings = {limit}"
        )
    built_slots = runtime["num_slots"]
    num_slots = options.max_num_seqs or built_slots
    if num_slots > built_slots:
        raise BundleError(
            f"--max-num-seqs = {num_slots}: {bundle.path} was built for {built_slots} request "
            f"slots; serve its checkpoint with --max-num-seqs {num_slots}, or rebuild with "
            f"--concurrency {num_slots}"
        )
    return RuntimeOptions(
        indexer_kv_dtype=_indexer_kv_dtype(options, bundle),
        num_slots=num_slots,
        page_size=runtime["page_size"],
        max_context_tokens=context,
        speculation=speculation,
        mixed=options.mixed,
        max_waiting=options.max_waiting,
        policy=options.policy,
        checkpoint_extra_work_fraction=options.checkpoint_extra_work_fraction,
        checkpoint_payoff=options.checkpoint_payoff,
        snapshot_rows=options.snapshot_rows,
        num_pages=options.num_pages,
        vision_feature_capacity=options.vision_feature_capacity,
        prompt_lookup=options.prompt_lookup,
        queue_lead_ms=options.queue_lead_ms,
    )


def _indexer_kv_dtype(options: ServeOptions, bundle: Bundle) -> str:
    """Serve's --indexer-kv-dtype, else the bundle's (older bundles: "auto")."""
    if options.indexer_kv_dtype is not None:
        where, value = "--indexer-kv-dtype", options.indexer_kv_dtype
    else:
        where = f"{bundle.path}/manifest.json runtime.indexer_kv_dtype"
        value = bundle.manifest["runtime"].get("indexer_kv_dtype", "auto")
    if value not in INDEXER_KV_DTYPES:
        raise BundleError(f"{where} = {value!r}: expected one of {', '.join(INDEXER_KV_DTYPES)}")
    return value


def follow_engine(options: ServeOptions, tp: TensorParallel) -> None:
    """A non-zero tensor-parallel rank: load its shard and execute rank zero's plans."""
    from ignition.distributed.follower import follow

    bundle = load(options, tp)
    device = resolve_device(options.device)
    in_graph = open_graph_rows(bundle, options.ple, device)
    worker, _selected, _pages, _windows = assemble_worker(
        bundle.model, bundle.catalog, bundle.eos_token_ids, runtime_options(options, bundle),
        before_capture=None if in_graph is None else in_graph.bind,
    )  # fmt: skip
    ple = open_table(bundle, options.ple, device, worker, in_graph)  # this rank's own rows
    try:
        follow(worker, tp)
    finally:
        if ple.mailbox is not None:
            ple.mailbox.close()


def open_engine(
    options: ServeOptions,
    on_program: Callable[[str], None] | None = None,
    listener: LoadListener | None = None,
    direct: bool = False,
    tp: TensorParallel | None = None,
    trace: TraceRecorder | None = None,
    faults: FaultPlan | None = None,
) -> tuple[Bundle, Engine]:
    """``direct`` uses the diagnostic direct scheduler instead of Helios; ``tp`` makes this
    rank zero of a tensor-parallel group; ``trace`` and ``faults`` go to ``assemble_engine``."""
    listener = listener or LoadListener(on_program=on_program)
    bundle = load(options, tp)
    runtime = runtime_options(options, bundle)
    if listener.on_bundle is not None:
        listener.on_bundle(bundle, len(selected_programs(bundle.catalog, runtime).descriptors))
    tick = listener.on_program
    wrap = None
    if tp is not None:
        from ignition.distributed.ranks import RankZeroWorker

        wrap = lambda worker: RankZeroWorker(worker, tp)  # noqa: E731
    device = resolve_device(options.device)
    in_graph = open_graph_rows(bundle, options.ple, device)  # bound at capture
    stats = EngineStats()

    def attach_ple(worker: ModelWorker) -> None:
        # Every rank delivers its own table rows; rank zero's counters reach /metrics.
        stats.ple = open_table(bundle, options.ple, device, worker, in_graph).stats

    grammar = LazyGrammarCompiler(
        bundle.tokenizer, bundle.model.config.vocab_size, bundle.eos_token_ids
    )
    if tp is not None:  # the followers would sample without the host's grammar masks
        grammar = LazyGrammarCompiler.unavailable("not yet with tensor parallelism")
    engine = assemble_engine(
        bundle.model,
        bundle.catalog,
        bundle,
        bundle.eos_token_ids,
        runtime,
        stats=stats,
        on_prepared=(lambda d, _p: tick(d.name)) if tick else None,
        scheduler_factory=direct_scheduler if direct else helios_scheduler,
        wrap_worker=wrap,
        before_capture=None if in_graph is None else in_graph.bind,
        attach_worker=attach_ple,
        vocab_size=bundle.model.config.vocab_size,
        grammar=grammar,
        trace=trace,
        faults=faults,
    )
    return bundle, engine
