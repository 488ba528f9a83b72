"""``GET /dashboard``: a live page of Helios's decisions, served by the API server itself.

One static page (server/static/dashboard.html, no build step) polls ``GET
/dashboard/state``, a small JSON summary of the engine's trace recorder
(runtime/tracing/recorder.py): the last frames as a timeline, widths per request class,
TTFT/TBT percentiles, queue and page usage and the current decision's reason. Reading it
copies a bounded summary on the event loop; the engine thread only ever appends to the
recorder, so a connected page never waits on it nor it on the page.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Query
from fastapi.responses import HTMLResponse, JSONResponse

from ignition.runtime.tracing import TraceRecorder

PAGE = Path(__file__).parent / "static" / "dashboard.html"
MAX_FRAMES = 240  # frames one state read may ask for


def install_dashboard(app: FastAPI, recorder: TraceRecorder) -> None:
    """Add the page and its state endpoint to ``app``."""
    page = PAGE.read_text()

    @app.get("/dashboard", response_class=HTMLResponse, include_in_schema=False)
    async def dashboard() -> HTMLResponse:
        return HTMLResponse(page, headers={"Cache-Control": "no-cache"})

    @app.get("/dashboard/state", include_in_schema=False)
    async def dashboard_state(frames: int = Query(120, ge=0, le=MAX_FRAMES)) -> JSONResponse:
        return JSONResponse(recorder.summary(frames), headers={"Cache-Control": "no-store"})
