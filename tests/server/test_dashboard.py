"""GET /dashboard and the trace file of a served run (a real server over a tiny bundle)."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.server.conftest import running_server, server_process
from tests.tracing.trace_schema import schema_errors


@pytest.fixture(scope="module")
def traced(bundle, tmp_path_factory):
    """A server writing a trace file, with the dashboard on (the default)."""
    path = tmp_path_factory.mktemp("trace") / "serve.json"
    with running_server(bundle, "serve", "--trace-file", str(path)) as url:
        yield url, path


def complete(url: str, max_tokens: int = 6) -> None:
    body = {"prompt": "hello there", "max_tokens": max_tokens, "ignore_eos": True}
    httpx.post(f"{url}/v1/completions", json=body, timeout=120).raise_for_status()


def test_the_dashboard_page_and_its_state_are_served(traced):
    url, _path = traced
    page = httpx.get(f"{url}/dashboard", timeout=10)
    assert page.status_code == 200 and "<canvas id=\"timeline\"" in page.text
    complete(url)
    last = httpx.get(f"{url}/dashboard/state", params={"frames": 5}, timeout=10).json()
    assert 0 < len(last["frames"]) <= 5 and last["reason"] in {"ordinary", "discovery", "stale"}
    # the request's inference frames may be followed by more than five state programs
    # (retention snapshots), so the widths are read over every frame this short run made
    state = httpx.get(f"{url}/dashboard/state", params={"frames": 240}, timeout=10).json()
    assert state["ttft_ms"]["count"] >= 1 and state["counters"]["pages"]["used"] >= 0
    inference = {k: v for k, v in state["widths"].items() if k in ("prefill", "decode")}
    assert inference and all(int(w) > 0 for row in inference.values() for w in row)


def test_a_state_read_asking_for_too_many_frames_is_a_400(traced):
    url, _path = traced
    assert httpx.get(f"{url}/dashboard/state", params={"frames": 10**6}).status_code == 400


def test_the_served_run_writes_a_valid_trace_file(traced):
    url, path = traced
    complete(url)
    deadline = time.monotonic() + 30  # the writer rewrites the file every 2 s
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    document = json.loads(path.read_text())
    assert schema_errors(document) == []
    assert any(e["ph"] == "X" and e["pid"] == 1 for e in document["traceEvents"])


def test_disable_dashboard_removes_the_page_even_beside_a_trace_file(bundle, tmp_path):
    args = ("--disable-dashboard", "--trace-file", str(tmp_path / "t.json"))
    with running_server(bundle, "serve", *args) as url:
        assert httpx.get(f"{url}/dashboard", timeout=10).status_code == 404
        assert httpx.get(f"{url}/dashboard/state", timeout=10).status_code == 404


def test_a_trace_file_in_a_missing_folder_stops_serve_with_its_name(bundle, tmp_path):
    missing = tmp_path / "nowhere" / "t.json"
    with pytest.raises(RuntimeError, match="--trace-file .*does not exist"):
        with server_process(bundle, "serve", "--trace-file", str(missing)):
            pass
