"""The one HTTP endpoint in front of the replicas: route, forward, stream back.

A replica failing before the first byte is skipped; mid-stream, that stream ends with an error
event and ``[DONE]``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ignition.replicas.asgi import Exchange, Head, forwarded_headers
from ignition.replicas.metrics import merge
from ignition.replicas.reports import ReplicaReport
from ignition.replicas.routing import NoReplicaError, Routed, routing_policy
from ignition.server.body import error_body

log = logging.getLogger("ignition.replicas")

# Seconds a replica has to report before this request is routed without it.
REPORT_TIMEOUT_S = 5.0
REPLICA_HEADER = "x-ignition-replica"
REASON_HEADER = "x-ignition-route"  # prefix, room or turn (routing.Choice.reason)


def _json(status: int, content: Any, headers: Mapping[str, str] | None = None) -> Response:
    body = json.dumps(content).encode()
    return Response(body, status, headers=dict(headers or {}), media_type="application/json")


def _unavailable(message: str) -> Response:
    body = error_body(message, "server_overloaded", None, 503)
    return _json(503, body, {"Retry-After": "1"})


def _stream_failure(message: str) -> bytes:
    event = json.dumps(error_body(message, "server_error"))
    return f"data: {event}\n\ndata: [DONE]\n\n".encode()


class Router:
    """``routing``: a name in routing.ROUTING_POLICIES; ``max_imbalance``: its bound."""

    def __init__(self, replicas: Mapping[str, Any], routing: str, max_imbalance: int) -> None:
        self.replicas = dict(replicas)
        self.policy = routing_policy(routing, max_imbalance)
        self.in_flight: Counter[str] = Counter()
        self.total: Counter[str] = Counter()
        self.decisions: Counter[tuple[str, str]] = Counter()  # (replica, reason)

    async def _report(self, name: str, path: str, body: bytes) -> ReplicaReport | None:
        try:
            call = self.replicas[name].report.remote(path, body)
            return await asyncio.wait_for(call, REPORT_TIMEOUT_S)
        except Exception as err:  # down or restarting: routed around
            log.warning("%s did not report: %s", name, type(err).__name__)
            return None

    async def reports(self, path: str = "", body: bytes = b"") -> list[ReplicaReport]:
        found = await asyncio.gather(*(self._report(n, path, body) for n in self.replicas))
        return [r for r in found if r is not None]

    async def __call__(self, request: Request) -> Response:
        path = request.url.path
        if path == "/metrics" and request.method == "GET":
            return await self._metrics()
        if path == "/replicas" and request.method == "GET":
            reports = [r.to_json() for r in await self.reports()]
            return _json(200, {"replicas": reports, "in_flight": dict(self.in_flight)})
        body = await request.body()
        headers = forwarded_headers(list(request.headers.items()))
        exchange = Exchange(request.method, path, request.url.query, headers, body)
        return await self._route(exchange)

    async def _route(self, exchange: Exchange) -> Response:
        left_out: set[str] = set()
        while True:
            probe = exchange.body if exchange.method == "POST" else b""
            found = await self.reports(exchange.path, probe)
            reports = [r for r in found if r.replica not in left_out]
            try:
                choice = self.policy.choose(reports, Routed(self.in_flight, self.total))
            except NoReplicaError as err:
                return _unavailable(str(err))
            name = choice.replica
            left_out.add(name)
            self.in_flight[name] += 1
            self.total[name] += 1
            self.decisions[(name, choice.reason)] += 1
            stream = self.replicas[name].options(stream=True).forward.remote(exchange)
            try:
                head = await stream.__anext__()
            except Exception as err:  # nothing was sent: the next choice answers instead
                self.in_flight[name] -= 1
                log.warning("%s failed before answering; retrying elsewhere: %r", name, err)
                continue
            if not isinstance(head, Head):
                self.in_flight[name] -= 1
                return _unavailable(f"{name} answered without a response head")
            headers = {k: v for k, v in head.headers}
            headers[REPLICA_HEADER] = name
            headers[REASON_HEADER] = choice.reason
            is_sse = (head.header("content-type") or "").startswith("text/event-stream")
            return StreamingResponse(
                self._body(name, stream, is_sse), status_code=head.status, headers=headers
            )

    async def _body(self, name: str, stream: Any, is_sse: bool) -> AsyncIterator[bytes]:
        finished = False
        try:
            async for piece in stream:
                yield piece
            finished = True
        except asyncio.CancelledError:
            raise
        except Exception as err:
            finished = True
            log.warning("%s failed mid-stream: %r", name, err)
            if is_sse:
                yield _stream_failure(f"replica {name} failed during this request; retry it")
        finally:
            self.in_flight[name] -= 1
            if not finished:
                stream.cancel()  # the client went away: the replica cancels the request

    async def _metrics(self) -> Response:
        async def text(name: str) -> str | None:
            try:
                call = self.replicas[name].metrics.remote()
                return await asyncio.wait_for(call, REPORT_TIMEOUT_S)
            except Exception:
                return None

        texts = await asyncio.gather(*(text(n) for n in self.replicas))
        merged = merge({n: t for n, t in zip(self.replicas, texts) if t is not None})
        own = ["# HELP ignition_router_requests_total Requests routed, by replica and reason",
               "# TYPE ignition_router_requests_total counter"]
        for (name, reason), n in sorted(self.decisions.items()):
            own.append(f'ignition_router_requests_total{{replica="{name}",reason="{reason}"}} {n}')
        return Response(merged + "\n".join(own) + "\n", media_type="text/plain; version=0.0.4")
