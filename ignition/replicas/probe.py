"""A replica's answer to the router's question about one request: its report (the prompt
tokenized as the server will, matched against retained checkpoints without touching them)."""

from __future__ import annotations

import json
from typing import Any

from ignition.replicas.reports import ReplicaReport


def prompt_ids(bridge: Any, path: str, body: bytes) -> list[int] | None:
    """The prompt tokens of a chat or completion body; None for anything the server refuses."""
    try:
        payload = json.loads(body) if body else None
        if not isinstance(payload, dict):
            return None
        if path.endswith("/chat/completions"):
            rendered = bridge.render_chat(
                payload["messages"],
                tools=payload.get("tools"),
                add_generation_prompt=payload.get("add_generation_prompt", True),
                template_kwargs=payload.get("chat_template_kwargs"),
            )
            return list(rendered.prompt_ids)
        if path.endswith("/completions"):
            prompt = payload.get("prompt")
            if isinstance(prompt, list) and len(prompt) == 1:
                prompt = prompt[0]
            if isinstance(prompt, str):
                return bridge.encode(prompt)
            if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
                return prompt
    except Exception:  # a bad body is the server's 400 to give, not the router's
        return None
    return None


def cached_prefix_tokens(bridge: Any, ids: list[int] | None) -> int:
    """The longest retained checkpoint prefixing ``ids`` in this replica's engine."""
    retention = getattr(bridge.engine, "retention", None)
    cache = getattr(retention, "cache", None)
    if not ids or cache is None:
        return 0
    return cache.rows.longest_retained(ids)


def report(name: str, bridge: Any, ids: list[int] | None) -> ReplicaReport:
    s = bridge.stats.snapshot()
    return ReplicaReport(
        replica=name,
        is_healthy=bridge.is_healthy(),
        cached_prefix_tokens=cached_prefix_tokens(bridge, ids),
        num_running=s.running,
        num_waiting=s.waiting,
        slots_used=s.slots_used,
        num_slots=s.num_slots,
        pages_used=s.pages_used,
        num_pages=s.num_pages,
    )
