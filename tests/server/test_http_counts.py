"""Issue 24, defect 4: flare_http_requests_total counts every response by status.

Before, only the handlers' own paths counted (6 of 46 error responses): validation
errors, malformed JSON, 404, 405 and 413 never reached the counter.
"""

from __future__ import annotations

import re

from ignition.server.config import ServerConfig
from tests.server.scripted import ScriptedEngine, client, run


def counts(text: str) -> dict[tuple[str, str], float]:
    pattern = (
        r'flare_http_requests_total\{endpoint="([^"]+)",model_name="[^"]+",status="(\d+)"\} (\S+)'
    )
    return {(e, s): float(v) for e, s, v in re.findall(pattern, text)}


def test_every_error_response_is_counted_by_endpoint_and_status():
    async def go():
        config = ServerConfig(max_request_bytes=2048)
        async with client(ScriptedEngine(), config) as c:
            await c.post("/v1/completions", json={"prompt": "x", "max_tokens": 2})  # 200
            await c.post("/v1/completions", json={"prompt": "x", "top_p": 0})  # validation
            await c.post(
                "/v1/completions",
                content=b"{not json",
                headers={"content-type": "application/json"},
            )
            await c.post("/v1/chat/completions", json={"messages": "no"})  # validation
            await c.get("/v1/nowhere")  # 404
            await c.get("/v1/completions")  # 405
            await c.post("/v1/completions", json={"prompt": "x" * 4096})  # 413
            return (await c.get("/metrics")).text

    seen = counts(run(go()))
    assert seen[("completions", "200")] == 1
    assert seen[("completions", "400")] == 2
    assert seen[("chat", "400")] == 1
    assert seen[("other", "404")] == 1
    assert seen[("completions", "405")] == 1
    assert seen[("completions", "413")] == 1
