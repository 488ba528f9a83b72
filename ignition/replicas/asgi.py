"""One HTTP exchange with an in-process ASGI app, streamed: the head, then body pieces.
Closing the stream early is a client disconnect (``http.disconnect``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

# Seconds an app gets to finish after the reader went away before its task is cancelled.
CLOSE_GRACE_S = 5.0


@dataclass(frozen=True)
class Head:
    """The response's status and headers (latin-1 pairs, as ASGI carries them)."""

    status: int
    headers: tuple[tuple[str, str], ...]

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)


@dataclass(frozen=True)
class Exchange:
    """The request as the router received it."""

    method: str
    path: str
    query: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""


def _scope(exchange: Exchange) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": exchange.method,
        "scheme": "http",
        "path": exchange.path,
        "raw_path": exchange.path.encode(),
        "query_string": exchange.query.encode("latin-1"),
        "root_path": "",
        "headers": [
            (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in exchange.headers
        ],
        "client": ("127.0.0.1", 0),
        "server": ("127.0.0.1", 80),
    }


async def exchange(app: Any, request: Exchange) -> AsyncIterator[Head | bytes]:
    """Run ``request`` through ``app``: yields one Head, then the body's non-empty pieces."""
    messages: asyncio.Queue[dict | None] = asyncio.Queue()
    disconnected = asyncio.Event()
    body_sent = False

    async def receive() -> dict:
        nonlocal body_sent
        if not body_sent:
            body_sent = True
            return {"type": "http.request", "body": request.body, "more_body": False}
        await disconnected.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        await messages.put(message)

    task = asyncio.create_task(app(_scope(request), receive, send))
    task.add_done_callback(lambda _t: messages.put_nowait(None))
    try:
        while (message := await messages.get()) is not None:
            if message["type"] == "http.response.start":
                headers = tuple(
                    (k.decode("latin-1"), v.decode("latin-1")) for k, v in message["headers"]
                )
                yield Head(message["status"], headers)
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    yield message["body"]
                if not message.get("more_body", False):
                    return
        if task.exception() is not None:
            raise task.exception()
    finally:
        disconnected.set()
        if not task.done():
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(task, CLOSE_GRACE_S)


async def collect(app: Any, request: Exchange) -> tuple[Head, bytes]:
    """The whole response (for short answers such as /metrics and /health)."""
    head, pieces = None, []
    async for item in exchange(app, request):
        if isinstance(item, Head):
            head = item
        else:
            pieces.append(item)
    if head is None:
        raise RuntimeError(f"{request.method} {request.path}: the app sent no response")
    return head, b"".join(pieces)


def forwarded_headers(headers: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """The request headers a replica's app should see (hop-by-hop ones dropped)."""
    hop = {"connection", "keep-alive", "transfer-encoding", "upgrade", "host"}
    return tuple((k, v) for k, v in headers if k.lower() not in hop)
