"""The HTTP app over an engine: the bundle's templates, tokenizer and vision settings, the
engine behind its asyncio bridge, the trace recorder; ``serve_forever`` runs it."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from ignition.runtime.chat.template_files import ChatTemplates
from ignition.runtime.loop.faults import FaultPlan
from ignition.serving.engine import LoadListener, ServeOptions, open_engine
from ignition.serving.server_config import server_config
from ignition.serving.vision import vision_serving

if TYPE_CHECKING:
    from fastapi import FastAPI

    from ignition.distributed.context import TensorParallel
    from ignition.runtime.async_engine import AsyncEngine
    from ignition.runtime.tracing.recorder import TraceRecorder


def gil_releasing_encoder(tokenizer, add_special_tokens: bool = True) -> Callable[[str], list[int]]:
    """``tokenizer.encode`` through ``encode_batch``, which releases the GIL while Rust works."""
    return lambda text: tokenizer.encode_batch([text], add_special_tokens=add_special_tokens)[0].ids


def open_app(
    options: ServeOptions,
    direct: bool = False,
    *,
    listener: LoadListener | None = None,
    tp: TensorParallel | None = None,
    on_fatal: Callable[[str], None] | None = None,
) -> tuple[FastAPI, AsyncEngine]:
    """Load the engine and build the HTTP app: ``(app, bridge)``, the bridge not started."""
    from ignition.runtime.async_engine import AsyncEngine
    from ignition.runtime.chat.template import ChatRenderer
    from ignition.server.app import create_app

    recorder = trace_recorder(options)
    bundle, engine = open_engine(
        options, listener=listener, direct=direct, tp=tp, trace=recorder,
        faults=FaultPlan.from_env(),
    )  # fmt: skip
    if options.chat_template is not None:
        source, text = options.chat_template
        special = bundle.chat_templates.special_tokens
        bundle.chat_templates = ChatTemplates({"default": text}, source, special)
    chat = ChatRenderer(bundle.chat_templates, bundle.encode_rendered, bundle.split_tokens())
    problem = chat.problem()
    if problem is not None:  # completions still serve; each chat request gets this as a 400
        print(f"warning: {problem}", file=sys.stderr)
    config = server_config(options, bundle, chat)
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
    vision = vision_serving(bundle, options.allowed_local_media_path)
    app = create_app(bridge, config, recorder, vision=vision)
    app.state.trace_writer = None
    if recorder is not None and options.trace_file is not None:
        from ignition.runtime.tracing.writer import TraceFileWriter

        app.state.trace_writer = TraceFileWriter(recorder, options.trace_file).start()
    return app, bridge


def trace_recorder(options: ServeOptions) -> TraceRecorder | None:
    """A trace recorder for the engine's loop when a trace file or the dashboard wants one."""
    if options.trace_file is None and not options.dashboard:
        return None
    from ignition.runtime.tracing.recorder import TraceRecorder

    return TraceRecorder()
