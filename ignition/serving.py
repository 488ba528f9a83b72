"""Glue shared by ``generate``, ``serve`` and ``debug-serve``: bundle -> engine.

It lives above the rooms (like cli.py) because it ties runtime, helios and
direct together; the CLI stays a thin argument parser.

``serve_forever`` returns the engine's failure when the loop could not continue:
by then every open request has received its final error chunk and uvicorn has
shut down, and the CLI exits non-zero so that a supervisor restarts the server.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
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
from ignition.runtime.chat_template_files import ChatTemplates
from ignition.runtime.copy_proposals import PromptLookup
from ignition.runtime.engine import Engine
from ignition.runtime.grammar import LazyGrammarCompiler
from ignition.runtime.ple import (
    PleOptions,
    PleTableError,
    delivers_table,
    open_in_graph,
    open_model_ple,
)
from ignition.runtime.stats import EngineStats
from ignition.runtime.worker import ModelWorker
from ignition.server.config import DEFAULT_MAX_REQUEST_BYTES, ServerConfig
from ignition.server.tokenizing import max_chars_per_token

if TYPE_CHECKING:
    from ignition.distributed.context import TensorParallel

# Seconds uvicorn waits for open streams after a fatal engine failure (they have ended).
SHUTDOWN_GRACE_S = 5


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
    # Requests' proposal source when they name none (--speculative-method; vLLM's
    # speculative_config "method"): "mtp", "ngram" or "both" (runtime/copy_drafts.py).
    speculative_method: str = "mtp"
    # Copy proposals' search (--prompt-lookup-max/-min; vLLM's prompt_lookup_max/min).
    prompt_lookup: PromptLookup = field(default_factory=PromptLookup)
    # Chrome trace-event / Perfetto JSON of the run (--trace-file; runtime/tracing/), and
    # the live page GET /dashboard (--disable-dashboard turns it off).
    trace_file: str | None = None
    dashboard: bool = True

    def follow(self, tp: TensorParallel) -> None:
        """Ranks 1..N-1 of a tensor-parallel group serving these options: the role
        ``distributed.launch`` gives them (it takes it from here, never imports serving)."""
        follow_engine(self, tp)


@dataclass
class LoadListener:
    """What the CLI shows while loading: the bundle, then one tick per prepared program."""

    on_bundle: Callable[[Bundle, int], None] | None = None
    on_program: Callable[[str], None] | None = None


def _load(options: ServeOptions, tp: TensorParallel | None) -> Bundle:
    """The bundle with the whole model, or with rank ``tp.rank``'s shard of it. A table this
    rank will deliver itself (host or disk residency) is left unread: its rows come from the
    shards, mapped in place, and the whole table is never in memory (docs/ple.md)."""
    configure_threads(resolve_device(options.device), options.num_threads)
    ple = serve_ple_options(
        options.ple, _built_ple(options.artifacts), str(Path(options.artifacts) / "manifest.json")
    )

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


def serve_ple_options(ple: PleOptions, built: dict, where: str = "manifest.json") -> PleOptions:
    """Serve's PLE options over the built bundle's (``manifest.json``'s ``ple`` entry): the
    build's residency, preload and row-cache bound, each unless serve names its own."""
    try:
        return ple.over(built, where)
    except ValueError as err:
        raise BundleError(str(err)) from None


def _built_ple(artifacts: str | Path) -> dict:
    """The bundle's ``ple`` entry ({} when it has none; a missing or bad manifest is
    ``load_bundle``'s error to report)."""
    try:
        entry = json.loads((Path(artifacts) / "manifest.json").read_text()).get("ple", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return entry if isinstance(entry, dict) else {}


def _runtime_options(options: ServeOptions, bundle: Bundle) -> RuntimeOptions:
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
    )


def _indexer_kv_dtype(options: ServeOptions, bundle: Bundle) -> str:
    """Serve's --indexer-kv-dtype, else the one the bundle was built and validated with
    (bundles written before the option: "auto")."""
    if options.indexer_kv_dtype is not None:
        where, value = "--indexer-kv-dtype", options.indexer_kv_dtype
    else:
        where = f"{bundle.path}/manifest.json runtime.indexer_kv_dtype"
        value = bundle.manifest["runtime"].get("indexer_kv_dtype", "auto")
    if value not in INDEXER_KV_DTYPES:
        raise BundleError(f"{where} = {value!r}: expected one of {', '.join(INDEXER_KV_DTYPES)}")
    return value


def follow_engine(options: ServeOptions, tp: TensorParallel) -> None:
    """A non-zero tensor-parallel rank: load its shard, prepare the same programs as rank
    zero (their warm-up collectives pair up) and execute rank zero's plans until it stops."""
    from ignition.distributed.follower import follow

    bundle = _load(options, tp)
    in_graph = _open_in_graph(bundle, options)
    worker, _selected, _pages, _windows = assemble_worker(
        bundle.model, bundle.catalog, bundle.eos_token_ids, _runtime_options(options, bundle),
        before_capture=None if in_graph is None else in_graph.bind,
    )  # fmt: skip
    ple = _open_ple(bundle, options, worker, in_graph)  # this rank's own rows (docs/ple.md)
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
) -> tuple[Bundle, Engine]:
    """``direct`` builds the engine around the diagnostic direct scheduler instead of Helios;
    ``tp`` makes this rank zero of a tensor-parallel group (:func:`follow_engine` runs the
    other ranks)."""
    listener = listener or LoadListener(on_program=on_program)
    bundle = _load(options, tp)
    runtime_options = _runtime_options(options, bundle)
    if listener.on_bundle is not None:
        selected = selected_programs(bundle.catalog, runtime_options)
        listener.on_bundle(bundle, len(selected.descriptors))
    tick = listener.on_program
    wrap = None
    if tp is not None:
        from ignition.distributed.ranks import RankZeroWorker

        wrap = lambda worker: RankZeroWorker(worker, tp)  # noqa: E731
    in_graph = _open_in_graph(bundle, options)  # CUDA, table off the device: bound at capture
    stats = EngineStats()

    def attach_ple(worker: ModelWorker) -> None:
        # The n-gram table at its residency; off the device, its rows reach the programs
        # through the worker. Tensor parallel: every rank delivers its own rows (the table is
        # replicated, not sharded); rank zero's counters are the ones /metrics shows.
        stats.ple = _open_ple(bundle, options, worker, in_graph).stats

    engine = assemble_engine(
        bundle.model,
        bundle.catalog,
        bundle,
        bundle.eos_token_ids,
        runtime_options,
        stats=stats,
        on_prepared=(lambda d, _p: tick(d.name)) if tick else None,
        scheduler_factory=direct_scheduler if direct else helios_scheduler,
        wrap_worker=wrap,
        before_capture=None if in_graph is None else in_graph.bind,
        attach_worker=attach_ple,
    )
    engine.vocab_size = bundle.model.config.vocab_size
    engine.grammar = LazyGrammarCompiler(
        bundle.tokenizer, bundle.model.config.vocab_size, bundle.eos_token_ids
    )
    if tp is not None:  # the followers would sample without the host's grammar masks
        engine.grammar = LazyGrammarCompiler.unavailable("not yet with tensor parallelism")
    return bundle, engine


def _ple_of(bundle: Bundle, options: ServeOptions) -> tuple[Path, PleOptions]:
    checkpoint = Path(bundle.manifest["checkpoint"]["path"])
    if not checkpoint.is_absolute():
        checkpoint = bundle.path / checkpoint
    ple = serve_ple_options(
        options.ple, bundle.manifest.get("ple", {}), str(bundle.path / "manifest.json")
    )
    return checkpoint, ple


def _open_in_graph(bundle: Bundle, options: ServeOptions):
    """CUDA with the table off the device: the programs' in-graph row source (None else)."""
    checkpoint, ple = _ple_of(bundle, options)
    try:
        return open_in_graph(checkpoint, ple, resolve_device(options.device), bundle.model)
    except (PleTableError, ValueError) as err:
        raise BundleError(str(err)) from None


def _open_ple(bundle: Bundle, options: ServeOptions, worker: object = None, in_graph=None):
    checkpoint, ple = _ple_of(bundle, options)
    try:
        device = resolve_device(options.device)
        return open_model_ple(checkpoint, ple, device, worker, bundle.model, True, in_graph)
    except (PleTableError, ValueError) as err:
        raise BundleError(str(err)) from None


def template_renders_tools(templates: ChatTemplates) -> bool:
    """Whether the template a request with tools renders with reads the ``tools`` variable.

    One that never reads it would drop a request's tools without a word, so the server
    answers such requests with a 400 instead (issue 24, defect 7). A template that does not
    parse counts as rendering them: its syntax error is every chat request's own 400.
    """
    from jinja2 import TemplateSyntaxError, meta

    from ignition.runtime.chat_sandbox import chat_environment

    _name, source = templates.select(has_tools=True)
    try:
        parsed = chat_environment().parse(source)
    except TemplateSyntaxError:
        return True
    return "tools" in meta.find_undeclared_variables(parsed)


def gil_releasing_encoder(
    tokenizer, add_special_tokens: bool = True
) -> Callable[[str], list[int]]:
    """Encode one text as ``tokenizer.encode`` does, without holding the GIL throughout.

    The server tokenizes on a worker thread, which only helps if the event loop can run
    meanwhile: ``Tokenizer.encode`` keeps the GIL for the whole call (a 2 MB prompt froze
    the loop for seconds), ``encode_batch`` releases it while Rust works.
    """
    return lambda text: tokenizer.encode_batch([text], add_special_tokens=add_special_tokens)[0].ids


def open_app(
    options: ServeOptions,
    direct: bool = False,
    *,
    listener: LoadListener | None = None,
    tp: TensorParallel | None = None,
    on_fatal: Callable[[str], None] | None = None,
):
    """Load the engine and build the HTTP app over it: ``(app, bridge)``, the bridge not yet
    started. ``serve_forever`` serves it with uvicorn; a data-parallel replica
    (ignition/replicas/) answers its router's requests with it in process."""
    from ignition.runtime import faults
    from ignition.runtime.async_engine import AsyncEngine
    from ignition.runtime.chat_template import ChatRenderer
    from ignition.server.app import create_app

    bundle, engine = open_engine(options, listener=listener, direct=direct, tp=tp)
    if options.chat_template is not None:
        source, text = options.chat_template
        special = bundle.chat_templates.special_tokens
        bundle.chat_templates = ChatTemplates({"default": text}, source, special)
    chat = ChatRenderer(bundle.chat_templates, bundle.encode_rendered, bundle.split_tokens())
    problem = chat.problem()
    if problem is not None:  # completions still serve; each chat request gets this as a 400
        print(f"warning: {problem}", file=sys.stderr)
    plan = faults.FaultPlan.from_env()
    if plan is not None:
        faults.install(engine, plan)
    config = _server_config(options, bundle, chat)
    bridge = AsyncEngine(
        engine,
        model_name=bundle.name,
        encode=gil_releasing_encoder(bundle.tokenizer),
        encode_plain=gil_releasing_encoder(bundle.tokenizer, add_special_tokens=False),
        decode=bundle.decode,
        chat=chat,
        generation_defaults=replace(
            bundle.generation_defaults, speculative_method=options.speculative_method
        ),
        on_fatal=on_fatal,
    )
    bridge.vision = vision_serving(bundle, options.allowed_local_media_path)
    recorder = trace_recorder(engine, options)
    app = create_app(bridge, config, recorder)
    app.state.trace_writer = None
    if recorder is not None and options.trace_file is not None:
        from ignition.runtime.tracing import TraceFileWriter

        app.state.trace_writer = TraceFileWriter(recorder, options.trace_file).start()
    return app, bridge


def trace_recorder(engine, options: ServeOptions):
    """The engine's trace recorder, hooked into its loop, when a trace file or the
    dashboard wants one; None otherwise (the loop then pays nothing)."""
    if options.trace_file is None and not options.dashboard:
        return None
    from ignition.runtime.tracing import TraceRecorder
    from ignition.runtime.tracing.hook import install_trace_hook

    recorder = TraceRecorder()
    install_trace_hook(engine, recorder)
    return recorder


def serve_forever(
    options: ServeOptions,
    host: str,
    port: int,
    direct: bool,
    *,
    listener: LoadListener | None = None,
    on_listening: Callable[[str], None] | None = None,
    tp: TensorParallel | None = None,
) -> str | None:
    """Prepare the programs, start the engine thread and run uvicorn until interrupted.

    Returns None after an ordinary shutdown, or the engine failure that stopped it.
    """
    import uvicorn

    server = None

    def stop_serving(_message: str) -> None:
        if server is not None:
            server.should_exit = True

    app, bridge = open_app(options, direct, listener=listener, tp=tp, on_fatal=stop_serving)
    uvicorn_config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
    )
    server = _announcing_server(uvicorn_config, on_listening)
    bridge.start()
    try:
        server.run()
    finally:
        bridge.stop()
        if app.state.trace_writer is not None:
            app.state.trace_writer.close()
    return bridge.failure


def _server_config(options: ServeOptions, bundle: Bundle, chat) -> ServerConfig:
    """The HTTP options, with the tool-call format detected from the chat templates
    unless --tool-call-parser names one."""
    from ignition.server.tools import detect_tool_call_parser

    templates = list(chat.templates.templates.values())
    try:
        return ServerConfig(
            served_model_names=options.served_model_names or (bundle.name,),
            api_key=options.api_key,
            max_request_bytes=options.max_request_bytes,
            tool_call_parser=options.tool_call_parser or detect_tool_call_parser(templates),
            enable_auto_tool_choice=options.enable_auto_tool_choice,
            reasoning_parser=options.reasoning_parser,
            template_renders_tools=template_renders_tools(chat.templates),
            max_chars_per_token=max_chars_per_token(bundle.tokenizer),
            vllm_metrics=options.metrics_names == "vllm",
            dashboard=options.dashboard,
        )
    except ValueError as err:
        raise BundleError(f"{chat.templates.source}: {err}") from None


def vision_serving(bundle: Bundle, allowed_folder: str | None = None):
    """What the server needs to accept images (server/images.py), or None for a model
    without a vision tower. The placeholder is the text of the vision start, image and
    vision end tokens, which must tokenize back to exactly those ids; the preprocessor
    settings come from the checkpoint, bounded by the largest prepared vision program."""
    from pathlib import Path

    from ignition.model.vision.images import ImagePolicy
    from ignition.model.vision.preprocess import ImageProcessing
    from ignition.server.images import VisionServing

    model = bundle.model
    config = model.config
    if model.visual is None or config.image_token_id is None:
        return None
    ids = [
        i
        for i in (config.vision_start_token_id, config.image_token_id, config.vision_end_token_id)
        if i is not None
    ]
    placeholder = bundle.decode(ids, skip_special_tokens=False)
    if bundle.encode_rendered([placeholder])[0] != ids:
        print(
            f"warning: {bundle.path}: the tokenizer does not spell the image tokens {ids} as "
            f"{placeholder!r}; image inputs are off",
            file=sys.stderr,
        )
        return None
    vision = model.visual.config
    checkpoint = Path(bundle.manifest["checkpoint"]["path"])
    if not checkpoint.is_absolute():
        checkpoint = bundle.path / checkpoint
    processing = ImageProcessing.for_checkpoint(
        checkpoint, vision.patch_size, vision.temporal_patch_size, vision.spatial_merge_size
    )
    if bundle.catalog.max_patch_capacity():
        processing = processing.bounded(bundle.catalog.max_patch_capacity())
    return VisionServing(
        image_token_id=config.image_token_id,
        placeholder=placeholder,
        merge_size=vision.spatial_merge_size,
        processing=processing,
        policy=ImagePolicy(allowed_folder=Path(allowed_folder) if allowed_folder else None),
    )


def _announcing_server(config, on_listening: Callable[[str], None] | None):
    """uvicorn's server, announcing the address once the socket is bound."""
    import uvicorn

    class Announcing(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets)
            if self.started and on_listening is not None:
                on_listening(f"http://{config.host}:{config.port}")

    return Announcing(config)
