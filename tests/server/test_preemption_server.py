"""Preemption through the real server: with --kv-pages too small for every request at
once, concurrent greedy completions are preempted and resumed, never lost, and return
what each returns unpreempted (issue 10, item 2)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.server.conftest import running_server
from tests.server.test_prefix_cache_server import _metric

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

PROMPTS = [[(7 * i + 5 * j) % 90 + 10 for j in range(44 + 3 * i)] for i in range(3)]


def _complete(url: str, prompt: list[int]) -> dict:
    body = {"prompt": prompt, "max_tokens": 28, "temperature": 0, "ignore_eos": True}
    r = httpx.post(f"{url}/v1/completions", json=body, timeout=600)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    return {"text": choice["text"], "finish": choice["finish_reason"]}


def test_requests_preempted_for_kv_pages_resume_with_their_unpreempted_output(bundle):
    """Concurrently the three need more pages than the pool's three; one at a time each
    fits, so the sequential run is the unpreempted reference (same server, no restart)."""
    with running_server(bundle, "serve", "--kv-pages", "3") as url:
        with ThreadPoolExecutor(len(PROMPTS)) as pool:
            together = list(pool.map(lambda p: _complete(url, p), PROMPTS))
        preemptions = _metric(url, "flare_num_preemptions")
        alone = [_complete(url, p) for p in PROMPTS]
        assert _metric(url, "flare_num_preemptions") == preemptions  # none when alone
    print(f"\n{preemptions:.0f} preemptions with 3 KV pages of 64 tokens")
    assert preemptions >= 1
    assert together == alone and all(r["finish"] == "length" for r in together)
