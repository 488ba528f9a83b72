"""The router over stand-in replica handles (no Ray): retry before the first byte, a clean
error event when a replica dies mid-stream, 503 when none is left, the load counts."""

from __future__ import annotations

import asyncio
import json

from ignition.replicas.asgi import Exchange, Head
from ignition.replicas.reports import ReplicaReport
from ignition.replicas.router import Router

SSE = Head(200, (("content-type", "text/event-stream"),))


class _Call:
    def __init__(self, value):
        self.value = value

    def __await__(self):
        async def get():
            if isinstance(self.value, Exception):
                raise self.value
            return self.value

        return get().__await__()


class _Stream:
    """forward's generator: its items, then (optionally) an error as a dead actor raises."""

    def __init__(self, items, error: Exception | None) -> None:
        self.items, self.error, self.cancelled = list(items), error, False

    def __aiter__(self):
        return self

    async def __anext__(self):
        if self.items:
            return self.items.pop(0)
        if self.error is not None:
            raise self.error
        raise StopAsyncIteration

    def cancel(self) -> None:
        self.cancelled = True


class _Method:
    def __init__(self, fn) -> None:
        self.remote = fn


class FakeReplica:
    def __init__(self, name: str, items=(), error: Exception | None = None, cached: int = 0):
        self.name, self.items, self.error, self.cached = name, items, error, cached
        self.forwarded = 0
        self.report = _Method(lambda path, body: _Call(self._report()))
        self.forward = _Method(self._forward)

    def _report(self) -> ReplicaReport:
        return ReplicaReport(self.name, True, self.cached, 0, 0, 0, 4, 0, 100)

    def _forward(self, exchange: Exchange) -> _Stream:
        self.forwarded += 1
        return _Stream(self.items, self.error)

    def options(self, **_):
        return self


def _run(router: Router, body: bytes = b"{}") -> tuple[int, dict, bytes]:
    async def go():
        response = await router._route(Exchange("POST", "/v1/completions", body=body))
        pieces = []
        if hasattr(response, "body_iterator"):
            pieces = [p async for p in response.body_iterator]
        else:
            pieces = [response.body]
        return response.status_code, dict(response.headers), b"".join(pieces)

    return asyncio.run(go())


def test_a_replica_that_fails_before_answering_is_retried_elsewhere():
    dead = FakeReplica("replica-0", error=RuntimeError("actor died"), cached=50)
    alive = FakeReplica("replica-1", items=[SSE, b"data: {}\n\n", b"data: [DONE]\n\n"])
    router = Router({"replica-0": dead, "replica-1": alive}, "affinity", 4)
    status, headers, body = _run(router)
    assert status == 200 and headers["x-ignition-replica"] == "replica-1"
    assert body == b"data: {}\n\ndata: [DONE]\n\n"
    assert dead.forwarded == alive.forwarded == 1
    assert router.in_flight == {"replica-0": 0, "replica-1": 0}


def test_a_replica_dying_mid_stream_ends_the_stream_with_an_error_event_and_done():
    dying = FakeReplica("replica-0", items=[SSE, b"data: {}\n\n"], error=RuntimeError("died"))
    router = Router({"replica-0": dying}, "affinity", 4)
    status, _headers, body = _run(router)
    events = [e for e in body.decode().split("\n\n") if e]
    assert status == 200 and events[0] == "data: {}" and events[-1] == "data: [DONE]"
    error = json.loads(events[1][len("data: ") :])["error"]
    assert error["type"] == "server_error" and "replica-0" in error["message"]
    assert router.in_flight["replica-0"] == 0


def test_with_every_replica_down_the_answer_is_an_openai_503():
    router = Router({"replica-0": FakeReplica("replica-0", error=RuntimeError("x"))}, "affinity", 4)
    status, headers, body = _run(router)
    assert status == 503 and headers["retry-after"] == "1"
    assert json.loads(body)["error"]["type"] == "server_overloaded"
