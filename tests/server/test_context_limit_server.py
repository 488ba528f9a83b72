"""Issue 38's reproductions against a real `ignition serve` and `ignition generate`.

`serve --max-context 512` then ``{"prompt": "x", "max_tokens": 511, "temperature": 0,
"ignore_eos": true}``: before the fix a 500 (``ResourceError: slot 0: 580 tokens exceed the
per-slot capacity 576``), then ``SchedulerError: fence N is not the oldest in flight``
stopped the loop, the neighbour got a 500 and the process exited. `generate` with a huge
``--max-tokens`` ended in a traceback. Speculation ``fixed`` verifies drafts every round, so
the random checkpoint's rejected drafts reach the fault on every run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.server.conftest import server_process

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

PROMPT = [10]  # one token: the request below reaches the limit exactly
NEIGHBOUR = [20, 21, 22]


def complete(url: str, prompt: list[int], max_tokens: int) -> httpx.Response:
    payload = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
    return httpx.post(f"{url}/v1/completions", json=payload, timeout=600)


def test_a_request_to_the_context_limit_ends_with_length_and_harms_no_one(bundle):
    args = ("--max-context", "512", "--speculation", "fixed")
    with server_process(bundle, "serve", *args) as (url, process, log):
        with ThreadPoolExecutor(2) as pool:
            long = pool.submit(complete, url, PROMPT, 511)
            neighbour = pool.submit(complete, url, NEIGHBOUR, 24)
            long, neighbour = long.result(), neighbour.result()
        assert long.status_code == 200, long.text
        choice = long.json()["choices"][0]
        assert choice["finish_reason"] == "length"
        assert long.json()["usage"]["completion_tokens"] == 511
        assert neighbour.status_code == 200, neighbour.text
        alone = complete(url, NEIGHBOUR, 24)
        assert neighbour.json()["choices"][0]["text"] == alone.json()["choices"][0]["text"]
        assert httpx.get(f"{url}/health").status_code == 200
        assert process.poll() is None
    text = log.read_text()
    assert "exceed the per-slot capacity" not in text
    assert "engine loop stopped" not in text


def test_generate_with_a_huge_max_tokens_stops_at_the_context_with_length(bundle):
    command = [
        sys.executable, "-m", "ignition.cli", "generate", "--artifacts", str(bundle),
        "--threads", "1", "--speculation", "fixed", "--max-context", "512",
        "--prompt", "x", "--max-tokens", "100000", "--json",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    assert report["finish_reason"] == "length"
    assert report["prompt_tokens"] + len(report["token_ids"]) == 512
