"""Issue 15's reliability suite against real `ignition serve` processes (loopback only).

Fault injection goes through the test-only fault plan (ignition/runtime/loop/faults.py,
enabled by ``IGNITION_TEST_FAULTS``): a request whose prompt starts with a marker
token fails at launch, at wait, or in publication; the ``step`` marker breaks the
loop itself. Innocent requests run beside the targeted ones and must finish whole.
"""

from __future__ import annotations

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.server.conftest import server_process

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

LAUNCH, WAIT, PUBLISH, STEP = 501, 502, 503, 504
FAULTS = f"launch={LAUNCH},wait={WAIT},publish={PUBLISH}"


def stream(url: str, prompt: list[int], max_tokens: int) -> dict:
    """One streamed completion: the events it got, in order."""
    payload = {
        "prompt": prompt,
        "max_tokens": max_tokens,
        "stream": True,
        "ignore_eos": True,
        "temperature": 0,
        "stream_options": {"include_usage": True},
    }
    events = []
    with httpx.stream("POST", f"{url}/v1/completions", json=payload, timeout=300) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(line[6:])
    assert events[-1] == "[DONE]"
    return {"events": [json.loads(e) for e in events[:-1]]}


def finish_of(result: dict) -> str | None:
    finishes = [c["finish_reason"] for e in result["events"] for c in e.get("choices", [])]
    return next((f for f in finishes if f is not None), None)


def gauge(url: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics").text
    match = re.search(rf"^{name}\{{[^}}]*\}} ([0-9.e+-]+)$", text, re.M)
    assert match, name
    return float(match.group(1))


def wait_idle(url: str) -> None:
    deadline = time.monotonic() + 30
    names = ("flare_requests_running", "flare_requests_waiting", "flare_request_slots_used")
    while any(gauge(url, n) for n in (*names, "flare_kv_pages_used")):
        assert time.monotonic() < deadline, {n: gauge(url, n) for n in names}
        time.sleep(0.1)


def test_injected_faults_fail_only_the_targeted_requests_and_the_server_keeps_serving(bundle):
    with server_process(bundle, "serve", env={"IGNITION_TEST_FAULTS": FAULTS}) as (url, _, _):
        with ThreadPoolExecutor(9) as pool:
            innocents = [pool.submit(stream, url, [10 + i, 11, 12], 24) for i in range(6)]
            time.sleep(0.5)
            targeted = [pool.submit(stream, url, [m, 11, 12], 24) for m in (LAUNCH, WAIT, PUBLISH)]
            for future in innocents:
                result = future.result()
                assert finish_of(result) == "length"
                assert result["events"][-1]["usage"]["completion_tokens"] == 24
            for future in targeted:
                result = future.result()
                assert any("error" in e for e in result["events"])
                assert finish_of(result) == "error"
        assert httpx.get(f"{url}/health").status_code == 200
        after = stream(url, [20, 21], 5)
        assert finish_of(after) == "length"
        wait_idle(url)


def test_an_engine_that_cannot_continue_ends_every_stream_cleanly_and_exits_non_zero(bundle):
    env = {"IGNITION_TEST_FAULTS": f"step={STEP}"}
    with server_process(bundle, "serve", env=env) as (url, process, log):
        with ThreadPoolExecutor(2) as pool:
            innocent = pool.submit(stream, url, [10, 11, 12], 2000)
            time.sleep(1.0)
            breaker = httpx.post(
                f"{url}/v1/completions",
                json={"prompt": [STEP, 1], "max_tokens": 4},
                timeout=60,
            )
            result = innocent.result()
        assert breaker.status_code == 500
        assert "engine loop stopped" in breaker.json()["error"]["message"]
        assert any("error" in e for e in result["events"])
        assert finish_of(result) == "error"
        assert process.wait(timeout=60) == 1
        assert "exiting" in log.read_text()


def test_a_soak_of_80_openai_streams_with_early_closes_returns_to_idle(bundle):
    import openai

    num_streams, concurrency, max_tokens = 80, 8, 12

    with server_process(bundle, "serve") as (url, _, _):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=300)

        def one(i: int) -> tuple[str, int]:
            stream = client.completions.create(
                model="qwen38",
                prompt=[10 + i % 40, 11, 12],
                max_tokens=max_tokens,
                stream=True,
                stream_options={"include_usage": True},
                extra_body={"ignore_eos": True},
            )
            if i % 5 == 0:  # 20% of the clients leave after the first chunk
                next(iter(stream))
                stream.close()
                return "closed", 0
            chunks = list(stream)
            finish = next(
                c.choices[0].finish_reason
                for c in chunks
                if c.choices[0:1] and c.choices[0].finish_reason
            )
            return finish, chunks[-1].usage.completion_tokens

        with ThreadPoolExecutor(concurrency) as pool:
            results = list(pool.map(one, range(num_streams)))
        finished = [r for r in results if r[0] != "closed"]
        assert len(finished) == num_streams * 4 // 5
        assert all(r == ("length", max_tokens) for r in finished)
        wait_idle(url)
        print(
            f"\nsoak: {num_streams} streams, {num_streams - len(finished)} closed early, 0 errors"
        )
