"""The errors a request can meet at the engine's door, each mapped to an HTTP status."""

from __future__ import annotations


class RequestError(ValueError):
    """A request the engine cannot serve as asked (maps to HTTP 400)."""


class QueueFullError(RuntimeError):
    """The engine has no room for another waiting request (maps to HTTP 503)."""


class EngineStoppedError(RuntimeError):
    """The engine loop has stopped and takes no more requests (maps to HTTP 503)."""
