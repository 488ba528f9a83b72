"""``ignition serve``'s process: the app under uvicorn until interrupted or the engine fails
(then every request has had its error and the CLI exits non-zero)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ignition.serving.app import open_app
from ignition.serving.engine import LoadListener, ServeOptions

if TYPE_CHECKING:
    from ignition.distributed.context import TensorParallel

# Seconds uvicorn waits for open streams after a fatal engine failure (they have ended).
SHUTDOWN_GRACE_S = 5


def serve_forever(
    options: ServeOptions,
    host: str,
    port: int,
    direct: bool,
    *,
    listener: LoadListener | None = None,
    on_listening: Callable[[str], None] | None = None,
    tp: TensorParallel | None = None,
) -> str | None:
    """Prepare programs, start the engine thread, run uvicorn; None after a normal shutdown,
    else the engine failure."""
    import uvicorn

    server = None

    def stop_serving(_message: str) -> None:
        if server is not None:
            server.should_exit = True

    app, bridge = open_app(options, direct, listener=listener, tp=tp, on_fatal=stop_serving)
    uvicorn_config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
    )
    server = _announcing_server(uvicorn_config, on_listening)
    bridge.start()
    try:
        server.run()
    finally:
        bridge.stop()
        if app.state.trace_writer is not None:
            app.state.trace_writer.close()
    return bridge.failure


def _announcing_server(config, on_listening: Callable[[str], None] | None):
    """uvicorn's server, announcing the address once the socket is bound."""
    import uvicorn

    class Announcing(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets)
            if self.started and on_listening is not None:
                on_listening(f"http://{config.host}:{config.port}")

    return Announcing(config)
