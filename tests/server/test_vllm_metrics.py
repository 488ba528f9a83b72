"""``--metrics-names vllm``: vllm:* aliases beside the flare_* names, with the same values."""

from __future__ import annotations

import re

from ignition.server.config import ServerConfig
from ignition.server.vllm_metrics import VLLM_ALIASES
from tests.server.scripted import ScriptedEngine, client, run


def scrape(config: ServerConfig, requests: int = 2) -> str:
    engine = ScriptedEngine()
    engine.stats.record_finished("stop")

    async def go():
        async with client(engine, config) as c:
            for _ in range(requests):
                await c.post("/v1/completions", json={"prompt": "hi"})
            return (await c.get("/metrics")).text

    return run(go())


def value(text: str, series: str) -> float:
    match = re.search(rf"^{re.escape(series)} ([0-9.e+]+)$", text, re.M)
    assert match is not None, f"{series} not exported"
    return float(match.group(1))


def test_without_the_option_only_flare_names_are_exported():
    text = scrape(ServerConfig())
    assert "flare_time_to_first_token_seconds_count" in text
    assert "vllm:" not in text


def test_each_vllm_alias_is_exported_beside_its_flare_metric():
    text = scrape(ServerConfig(vllm_metrics=True))
    for flare, aliases in VLLM_ALIASES.items():
        if f"# TYPE {flare}" not in text:
            continue  # a family this engine has not produced yet
        for alias in aliases:
            assert f"# TYPE {alias}" in text, alias
    assert "# TYPE vllm:num_requests_waiting gauge" in text
    assert "# TYPE vllm:time_to_first_token_seconds histogram" in text


def test_an_alias_carries_the_values_of_its_flare_metric():
    text = scrape(ServerConfig(vllm_metrics=True), requests=3)
    label = '{model_name="scripted"}'
    for flare, vllm in (
        ("flare_time_to_first_token_seconds_count", "vllm:time_to_first_token_seconds_count"),
        ("flare_e2e_request_latency_seconds_count", "vllm:e2e_request_latency_seconds_count"),
        ("flare_requests_running", "vllm:num_requests_running"),
    ):
        assert value(text, vllm + label) == value(text, flare + label)
    assert value(text, "vllm:e2e_request_latency_seconds_count" + label) == 3


def test_request_success_uses_vllms_finished_reason_label():
    text = scrape(ServerConfig(vllm_metrics=True))
    series = 'vllm:request_success_total{finished_reason="stop",model_name="scripted"}'
    assert value(text, series) == 1
