"""``GET /dashboard``: a live page of Helios's decisions, polling a bounded summary of the
engine's trace recorder (docs/server.md, "Dashboard").
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Query
from fastapi.responses import HTMLResponse, JSONResponse

from ignition.runtime.tracing.recorder import TraceRecorder

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
