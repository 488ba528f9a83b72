"""One data-parallel replica: a whole Ignition server answering its router in process.
Imports no Ray; ``check_health`` fails once the engine loop stopped, and Ray replaces it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from ignition.replicas.asgi import Exchange, Head, collect, exchange
from ignition.replicas.probe import prompt_ids, report
from ignition.replicas.reports import ReplicaReport


class ReplicaServer:
    """``options``: serving.engine.ServeOptions; ``name``: the replica's label (``replica-0``)."""

    def __init__(self, options: Any, name: str) -> None:
        from ignition.serving.app import open_app

        self.name = name
        self.app, self.bridge = open_app(options)
        self.bridge.start()

    async def report(self, path: str = "", body: bytes = b"") -> ReplicaReport:
        """Room and cache for the request ``path`` with ``body`` (empty: room only)."""
        ids = await asyncio.to_thread(prompt_ids, self.bridge, path, body) if body else None
        return report(self.name, self.bridge, ids)

    async def forward(self, request: Exchange) -> AsyncIterator[Head | bytes]:
        """The server's response to ``request``: its Head, then its body pieces."""
        async for item in exchange(self.app, request):
            yield item

    async def metrics(self) -> str:
        """This replica's /metrics text (the router labels and merges them)."""
        _head, body = await collect(self.app, Exchange("GET", "/metrics"))
        return body.decode()

    def check_health(self) -> None:
        if not self.bridge.is_healthy():
            raise RuntimeError(f"{self.name}: {self.bridge.failure or 'the engine stopped'}")

    def shutdown(self) -> None:
        self.bridge.stop()

    def __del__(self) -> None:
        bridge = getattr(self, "bridge", None)
        if bridge is not None:
            bridge.stop(timeout_s=1.0)
