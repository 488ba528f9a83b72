"""Glue shared by ``generate``, ``serve`` and ``debug-serve``: bundle -> engine.

It lives above the rooms (like cli.py) because it ties runtime, helios and
direct together; the CLI stays a thin argument parser.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from ignition.compiler.device import configure_threads, resolve_device
from ignition.direct.scheduler import direct_scheduler
from ignition.helios import helios_scheduler
from ignition.helios.config import PolicyConfig
from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.bundle import Bundle, load_bundle
from ignition.runtime.engine import Engine


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


def open_engine(
    options: ServeOptions, on_program: Callable[[str], None] | None = None, direct: bool = False
) -> tuple[Bundle, Engine]:
    """``direct`` builds the engine around the diagnostic direct scheduler instead of Helios."""
    configure_threads(resolve_device(options.device), options.num_threads)
    bundle = load_bundle(options.artifacts, options.device)
    runtime = bundle.manifest["runtime"]
    speculation = options.speculation or runtime["speculation"]
    context = options.max_context_tokens or min(bundle.model.config.max_position_embeddings, 8192)
    runtime_options = RuntimeOptions(
        num_slots=runtime["num_slots"],
        page_size=runtime["page_size"],
        max_context_tokens=context,
        speculation=speculation,
        mixed=options.mixed,
        max_waiting=options.max_waiting,
        policy=options.policy,
    )
    engine = assemble_engine(
        bundle.model,
        bundle.catalog,
        bundle,
        bundle.eos_token_ids,
        runtime_options,
        on_prepared=(lambda d, _p: on_program(d.name)) if on_program else None,
        scheduler_factory=direct_scheduler if direct else helios_scheduler,
    )
    return bundle, engine


def serve_forever(options: ServeOptions, host: str, port: int, direct: bool) -> None:
    """Prepare the programs, start the engine thread and run uvicorn until interrupted."""
    import uvicorn

    from ignition.runtime.async_engine import AsyncEngine
    from ignition.runtime.chat_template import ChatRenderer
    from ignition.server.app import create_app

    bundle, engine = open_engine(options, direct=direct)
    chat = ChatRenderer(bundle.chat_templates, bundle.encode_rendered, bundle.split_tokens())
    problem = chat.problem()
    if problem is not None:  # completions still serve; each chat request gets this as a 400
        print(f"warning: {problem}", file=sys.stderr)
    bridge = AsyncEngine(
        engine,
        model_name=bundle.name,
        encode=bundle.encode,
        chat=chat,
        generation_defaults=bundle.generation_defaults,
    )
    bridge.start()
    try:
        uvicorn.run(create_app(bridge), host=host, port=port, log_level="warning")
    finally:
        bridge.stop()
