"""`ignition debug-serve --direct`: the same API under the diagnostic scheduler."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.server.conftest import running_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_direct_scheduler_serves_concurrent_requests(bundle):
    with running_server(bundle, "debug-serve", "--direct", "--speculation", "off") as url:

        def complete(prompt: str) -> dict:
            response = httpx.post(
                f"{url}/v1/completions",
                timeout=120,
                json={"prompt": prompt, "max_tokens": 7, "ignore_eos": True, "temperature": 0},
            )
            assert response.status_code == 200, response.text
            return response.json()

        with ThreadPoolExecutor(3) as pool:
            bodies = list(pool.map(complete, ["import os\n", "def f():\n", "class A:\n" * 200]))
        assert [b["usage"]["completion_tokens"] for b in bodies] == [7, 7, 7]
        metrics = httpx.get(f"{url}/metrics").text
        kinds = r'flare_scheduler_executions_total\{class="\w+",kind="%s",model_name="qwen38"\}'
        assert re.search(kinds % "prefill", metrics)
        assert re.search(kinds % "decode", metrics)
