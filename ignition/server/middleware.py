"""ASGI layers around the app: body cap, API key, a last-resort 500 and the response
counter, plain ASGI so that streaming responses pass through untouched (docs/server.md,
"Middleware").
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Callable
from typing import Any

from ignition.server.body import error_body

log = logging.getLogger("ignition.server")
Scope = dict[str, Any]


async def send_error(
    send,
    status: int,
    message: str,
    kind: str,
    code: str | None = None,
    headers: dict[str, str] | None = None,
    param: str | None = None,
) -> None:
    body = json.dumps(error_body(message, kind, param, code)).encode()
    raw_headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *((k.lower().encode(), v.encode()) for k, v in (headers or {}).items()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


def utf8_problem(body: bytes) -> str | None:
    """Why ``body`` is not UTF-8 text, naming the first bad byte; None when it is."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as err:
        return (
            f"the request body is not valid UTF-8 JSON: {err.reason} "
            f"(byte 0x{body[err.start]:02x}) at byte {err.start}"
        )
    return None


class BodyLimit:
    """Buffer at most ``max_bytes`` of a request body, check that it is UTF-8, then replay
    it to the app."""

    def __init__(self, app, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = (
            f"the request body exceeds the server's limit of {self.max_bytes} bytes "
            "(--max-request-bytes)"
        )
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await send_error(send, 413, too_large, "invalid_request_error", "request_too_large")
            return
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await send_error(send, 413, too_large, "invalid_request_error", "request_too_large")
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        problem = utf8_problem(body)
        if problem is not None:
            await send_error(send, 400, problem, "invalid_request_error", param="body")
            return
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class ApiKey:
    """Bearer auth on /v1/*."""

    def __init__(self, app, api_key: str) -> None:
        self.app = app
        self.expected = f"Bearer {api_key}".encode()

    async def __call__(self, scope: Scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/v1/"):
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                await send_error(
                    send,
                    401,
                    "missing or incorrect API key: send the header 'Authorization: Bearer <key>'",
                    "invalid_request_error",
                    "invalid_api_key",
                )
                return
        await self.app(scope, receive, send)


class LastResort:
    """A JSON 500 for anything unexpected, without dropping the connection."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking(message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking)
        except Exception as err:
            log.exception("unexpected error on %s %s", scope.get("method"), scope.get("path"))
            if not started:
                await send_error(
                    send, 500, f"internal error: {type(err).__name__}: {err}", "server_error"
                )


# Endpoint labels of flare_http_requests_total; any other path counts as "other", so a
# scanner's random 404s cannot grow the label set.
ENDPOINT_LABELS = {
    "/v1/completions": "completions",
    "/v1/chat/completions": "chat",
    "/v1/models": "models",
    "/tokenize": "tokenize",
    "/detokenize": "detokenize",
    "/health": "health",
    "/ping": "ping",
    "/version": "version",
    "/metrics": "metrics",
}


def endpoint_label(path: str) -> str:
    if path.startswith("/v1/models/"):
        return "models"
    return ENDPOINT_LABELS.get(path, "other")


class CountResponses:
    """Count every HTTP response by endpoint and status when its head is sent."""

    def __init__(self, app, count: Callable[[str, int], None]) -> None:
        self.app = app
        self.count = count

    async def __call__(self, scope: Scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        endpoint = endpoint_label(scope.get("path", ""))

        async def counting(message) -> None:
            if message["type"] == "http.response.start":
                self.count(endpoint, int(message["status"]))
            await send(message)

        await self.app(scope, receive, counting)
