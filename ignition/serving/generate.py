"""Offline generation through the serving runtime (``ignition generate``), no HTTP server."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ignition.helios import ScheduledPlan
from ignition.runtime.executors.frames import FrameResult
from ignition.runtime.requests.request import GenerationRequest, SamplingParams, StreamChunk
from ignition.serving.engine import LoadListener, ServeOptions, open_engine

if TYPE_CHECKING:
    from ignition.distributed.context import TensorParallel


def generate_once(
    options: ServeOptions,
    prompt: str,
    *,
    max_tokens: int,
    temperature: float = 0.0,
    top_p: float = 1.0,
    top_k: int = 0,
    seed: int | None = None,
    listener: LoadListener | None = None,
    tp: TensorParallel | None = None,
) -> dict[str, Any]:
    """Generate one completion: token ids, text, finish reason and per-step timing; ``tp``
    runs as rank zero of a tensor-parallel group."""
    bundle, engine = open_engine(options, listener=listener, tp=tp)
    prompt_ids = bundle.encode(prompt)
    chunks: list[StreamChunk] = []
    steps: list[dict[str, Any]] = []

    def on_frame(plan: ScheduledPlan, result: FrameResult) -> None:
        steps.append(
            {
                "program": plan.descriptor.name,
                "kind": plan.descriptor.kind.value,
                "device_ms": result.timing.device_ns / 1e6,
                "wall_ms": result.timing.wall_ns / 1e6,
                "tokens": sum(len(r.token_ids) for r in result.records),
                "prompt_tokens": sum(r.num_prompt_tokens for r in result.records),
            }
        )

    engine.frame_listeners.append(on_frame)
    sampling = SamplingParams(
        max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k, seed=seed
    )
    began = time.perf_counter()
    engine.submit(GenerationRequest("generate-0", tuple(prompt_ids), sampling), chunks.append)
    engine.run_until_idle()
    elapsed = time.perf_counter() - began
    token_ids = [t for c in chunks for t in c.token_ids]
    return {
        "prompt_tokens": len(prompt_ids),
        "token_ids": token_ids,
        "text": "".join(c.text for c in chunks),
        "finish_reason": chunks[-1].finish_reason if chunks else None,
        "elapsed_s": elapsed,
        "steps": steps,
    }
