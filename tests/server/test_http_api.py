"""The HTTP layer alone: OpenAI bodies, SSE framing, error mapping, cancellation.

The engine here is a scripted stand-in so that the API contract is tested
without a model; tests/server/test_scheduler.py runs the real server.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from ignition.runtime.requests.generation_config import GenerationDefaults
from ignition.runtime.requests.request import GenerationRequest, StreamChunk
from tests.server.scripted import ScriptedEngine, client, run


def test_completion_returns_text_and_usage():
    engine = ScriptedEngine()

    async def go():
        async with client(engine) as c:
            return await c.post("/v1/completions", json={"prompt": "hello", "max_tokens": 8})

    r = run(go())
    assert r.status_code == 200
    body = r.json()
    assert body["object"] == "text_completion"
    assert body["model"] == "scripted"  # the served model when the request names none
    assert body["choices"][0]["text"] == "one two three four "
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"] == {
        "prompt_tokens": 5,
        "completion_tokens": 4,
        "total_tokens": 9,
        "prompt_tokens_details": {"cached_tokens": 0},
    }


def test_usage_reports_cached_prompt_tokens_as_vllm_does():
    """usage.prompt_tokens_details.cached_tokens counts tokens restored from a checkpoint."""
    engine = ScriptedEngine()
    engine.cached = 3

    async def go():
        async with client(engine) as c:
            plain = await c.post("/v1/completions", json={"prompt": "hello", "max_tokens": 8})
            streamed = await c.post(
                "/v1/completions",
                json={
                    "prompt": "hello",
                    "max_tokens": 8,
                    "stream": True,
                    "stream_options": {"include_usage": True},
                },
            )
            return plain, streamed

    plain, streamed = run(go())
    assert plain.json()["usage"]["prompt_tokens_details"] == {"cached_tokens": 3}
    events = [line[6:] for line in streamed.text.splitlines() if line.startswith("data: {")]
    final = json.loads(events[-1])
    assert final["usage"]["prompt_tokens_details"] == {"cached_tokens": 3}


def test_max_tokens_reaches_the_engine_and_length_is_reported():
    engine = ScriptedEngine()

    async def go():
        async with client(engine) as c:
            return await c.post("/v1/completions", json={"prompt": "hi", "max_tokens": 2})

    body = run(go()).json()
    assert engine.requests[0].sampling.max_tokens == 2
    assert body["choices"][0]["finish_reason"] == "length"


def test_sampling_fields_reach_the_engine():
    engine = ScriptedEngine()
    payload = {
        "prompt": [5, 6, 7],
        "temperature": 0.5,
        "top_p": 0.9,
        "top_k": 4,
        "seed": 11,
        "stop": ["x", "yz"],
    }

    async def go():
        async with client(engine) as c:
            return await c.post("/v1/completions", json=payload)

    assert run(go()).status_code == 200
    request = engine.requests[0]
    assert request.prompt_ids == (5, 6, 7)
    s = request.sampling
    assert (s.temperature, s.top_p, s.top_k, s.seed, s.stop) == (0.5, 0.9, 4, 11, ("x", "yz"))


def test_chat_goes_through_the_chat_template():
    engine = ScriptedEngine()
    payload = {"messages": [{"role": "user", "content": "hey"}], "max_completion_tokens": 3}

    async def go():
        async with client(engine) as c:
            return await c.post("/v1/chat/completions", json=payload)

    body = run(go()).json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "one two three "}
    assert engine.requests[0].prompt_ids == tuple(engine.encode("<user>hey<assistant>"))


def test_streaming_sends_sse_data_lines_ending_with_done():
    engine = ScriptedEngine()
    payload = {
        "messages": [{"role": "user", "content": "hey"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }

    async def go():
        async with client(engine) as c:
            return await c.post("/v1/chat/completions", json=payload)

    r = run(go())
    assert r.headers["content-type"].startswith("text/event-stream")
    lines = [line for line in r.text.split("\n") if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"
    events = [json.loads(line[6:]) for line in lines[:-1]]
    assert events[0]["choices"][0]["delta"] == {"role": "assistant"}
    text = "".join(e["choices"][0]["delta"].get("content", "") for e in events if e["choices"])
    assert text == "one two three four "
    assert events[-1]["usage"]["completion_tokens"] == 4


@pytest.mark.parametrize(
    ("payload", "param"),
    [
        ({"prompt": "x", "max_tokens": 0}, "max_tokens"),
        ({"prompt": "x", "temperature": -1}, "temperature"),
        ({"prompt": "x", "top_p": 0}, "top_p"),
        ({"prompt": "x", "n": 0}, "n"),
        ({"prompt": ""}, "prompt"),
        ({"prompt": "x", "logprobs": 21}, "logprobs"),
        ({"prompt": "x", "presence_penalty": 2.5}, "presence_penalty"),
        ({"prompt": "x", "repetition_penalty": 0}, "repetition_penalty"),
        ({"prompt": "x", "repetition_penalty": 1e-303}, "repetition_penalty"),
        ({"prompt": "x", "min_p": 1.5}, "min_p"),
        ({"prompt": "x", "min_tokens": -1}, "min_tokens"),
        ({"prompt": "x", "logit_bias": {"abc": 1}}, "logit_bias"),
        ({"prompt": "x", "logit_bias": {"999999": 1}}, "logit_bias"),
        ({"prompt": "x", "best_of": 1, "n": 2}, "best_of"),
        ({"prompt": "x", "best_of": 3, "stream": True}, "best_of"),
        ({"prompt": "x", "prompt_logprobs": 21}, "prompt_logprobs"),
        ({"prompt": "x", "prompt_logprobs": 1, "stream": True}, "prompt_logprobs"),
        ({}, "prompt"),
    ],
)
def test_bad_parameters_are_400_with_the_openai_error_body(payload, param):
    async def go():
        async with client(ScriptedEngine()) as c:
            return await c.post("/v1/completions", json=payload)

    r = run(go())
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert param in error["message"]


def test_prompt_longer_than_the_context_is_400():
    async def go():
        async with client(ScriptedEngine()) as c:
            return await c.post("/v1/completions", json={"prompt": "x" * 80})

    r = run(go())
    assert r.status_code == 400
    assert "context" in r.json()["error"]["message"]


def test_max_tokens_beyond_the_context_is_400():
    async def go():
        async with client(ScriptedEngine()) as c:
            return await c.post("/v1/completions", json={"prompt": "x" * 60, "max_tokens": 10})

    assert run(go()).status_code == 400


def test_full_queue_is_503():
    async def go():
        async with client(ScriptedEngine(full=True)) as c:
            return await c.post("/v1/completions", json={"prompt": "x"})

    r = run(go())
    assert r.status_code == 503
    assert "busy" in r.json()["error"]["message"]


def test_closing_a_stream_early_closes_the_engine_request():
    engine = ScriptedEngine()

    async def go():
        async with client(engine) as c:
            payload = {"prompt": "x", "stream": True}
            async with c.stream("POST", "/v1/completions", json=payload) as r:
                async for line in r.aiter_lines():
                    if line.startswith("data: {"):
                        engine.gate.clear()
                        break
        await asyncio.sleep(0.05)

    run(go())
    assert engine.closed == [engine.requests[0].request_id]


def test_speculative_metrics_are_labelled_by_proposal_source():
    """Copy drafts ("ngram") count under their own source, not as learned ("mtp") draws."""
    engine = ScriptedEngine()
    engine.stats.record_speculation(num_offered=4, num_accepted=3, source="ngram")

    async def go():
        async with client(engine) as c:
            return await c.get("/metrics")

    text = run(go()).text
    m = 'model_name="scripted"'
    assert f'flare_speculative_draft_tokens_total{{{m},source="ngram"}} 4.0' in text
    assert f'flare_speculative_accepted_tokens_total{{{m},source="ngram"}} 3.0' in text
    assert f'flare_speculative_draft_tokens_total{{{m},source="mtp"}} 0.0' in text


def test_models_health_and_metrics():
    engine = ScriptedEngine()
    engine.stats.record_execution("decode", 1500)
    engine.stats.record_execution("speculative", 700, "acceptance_learning")
    engine.stats.record_speculation(num_offered=3, num_accepted=2)

    async def go():
        async with client(engine) as c:
            await c.post("/v1/completions", json={"prompt": "x"})
            return [await c.get(p) for p in ("/v1/models", "/health", "/metrics")]

    models, health, metrics = run(go())
    assert models.json()["data"][0]["id"] == "scripted"
    assert health.json() == {"status": "ok"}
    text = metrics.text
    m = 'model_name="scripted"'
    assert f'flare_scheduler_executions_total{{class="ordinary",kind="decode",{m}}} 1.0' in text
    assert (
        f'flare_scheduler_execution_nanoseconds_total{{class="ordinary",kind="decode",{m}}} 1500.0'
        in text
    )
    assert (
        'flare_scheduler_execution_nanoseconds_total{class="acceptance_learning",'
        f'kind="speculative",{m}}} 700.0' in text
    )
    for cls in ("ordinary", "discovery", "timing_refresh", "acceptance_learning"):
        assert f'flare_scheduler_executions_total{{class="{cls}",kind="decode",{m}}}' in text
    assert f'flare_speculative_draft_tokens_total{{{m},source="mtp"}} 3.0' in text
    assert (
        f'flare_speculative_accepted_tokens_per_position_total{{{m},position="2",source="mtp"}} 1.0'
        in text
    )
    assert f"flare_time_to_first_token_seconds_count{{{m}}} 1.0" in text
    assert f"flare_e2e_request_latency_seconds_count{{{m}}} 1.0" in text


class FailingEngine(ScriptedEngine):
    """The frame serving this request fails after two chunks."""

    async def _stream(self, request: GenerationRequest):
        yield StreamChunk("one ", (1,), 1, 1)
        yield StreamChunk("", (), 1, 1, "error", "decode-b1 failed: RuntimeError: boom")


def test_a_failed_request_is_a_500_with_the_reason():
    async def go():
        async with client(FailingEngine()) as c:
            return await c.post("/v1/completions", json={"prompt": "x"})

    r = run(go())
    assert r.status_code == 500
    assert r.json()["error"]["type"] == "server_error"
    assert "boom" in r.json()["error"]["message"]


def test_a_failed_stream_ends_with_an_error_event_a_finish_reason_chunk_and_done():
    async def go():
        async with client(FailingEngine()) as c:
            return await c.post("/v1/completions", json={"prompt": "x", "stream": True})

    lines = [line for line in run(go()).text.split("\n") if line]
    assert lines[-1] == "data: [DONE]"
    assert "boom" in json.loads(lines[-3][6:])["error"]["message"]
    assert json.loads(lines[-2][6:])["choices"][0]["finish_reason"] == "error"


def test_metrics_count_prefix_cache_hits_restored_tokens_and_evictions():
    engine = ScriptedEngine()
    engine.stats.record_prefix_cache(queries=3, hits=2, tokens=700)
    engine.stats.set_prefix_cache_evictions(5)

    async def go():
        async with client(engine) as c:
            return await c.get("/metrics")

    text = run(go()).text
    assert 'flare_prefix_cache_queries_total{model_name="scripted"} 3.0' in text
    assert 'flare_prefix_cache_hits_total{model_name="scripted"} 2.0' in text
    assert 'flare_prefix_cache_restored_tokens_total{model_name="scripted"} 700.0' in text
    assert 'flare_prefix_cache_evictions_total{model_name="scripted"} 5.0' in text


def test_metrics_count_the_restores_and_captures_the_payoff_rule_left_out():
    engine = ScriptedEngine()
    engine.stats.set_prefix_cache_unprofitable(restores=4, captures=9)

    async def go():
        async with client(engine) as c:
            return await c.get("/metrics")

    text = run(go()).text
    assert 'flare_prefix_cache_unprofitable_restores_total{model_name="scripted"} 4.0' in text
    assert 'flare_prefix_cache_unprofitable_captures_total{model_name="scripted"} 9.0' in text


@pytest.mark.parametrize(
    ("url", "payload", "param", "rule"),
    [
        ("/v1/completions", {"prompt": "x", "stop": ["a"] * 10}, "stop", "at most 8 items"),
        ("/v1/completions", {"prompt": "x", "stop": ""}, "stop", "at least 1 character"),
        ("/v1/completions", {"prompt": "x", "stop": ["a", ""]}, "stop.1", "at least 1 character"),
        (
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": [{"type": "text"}]}]},
            "messages.0.content.0.text",
            "is required",
        ),
        (
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": [{"text": "x"}]}]},
            "messages.0.content.0",
            "'type' field",
        ),
    ],
)
def test_a_union_field_error_names_the_rule_of_the_member_the_input_is(url, payload, param, rule):
    """Issue 24, defect 6: not "Input should be a valid string" from the str member."""

    async def go():
        async with client(ScriptedEngine()) as c:
            return await c.post(url, json=payload)

    error = run(go()).json()["error"]
    assert error["param"] == param
    assert rule in error["message"]
    assert "valid string" not in error["message"]


def _served_method(body: dict, default: str | None = None) -> str:
    engine = ScriptedEngine()
    if default is not None:
        engine.generation_defaults = GenerationDefaults(speculative_method=default)

    async def go():
        async with client(engine) as c:
            return await c.post("/v1/completions", json={"prompt": "x", **body})

    assert run(go()).status_code == 200
    return engine.requests[0].sampling.speculative_method


def test_a_request_chooses_its_speculative_method():
    assert _served_method({}) == "mtp"
    assert _served_method({"speculative_method": "ngram"}) == "ngram"
    assert _served_method({"speculative_method": "both"}) == "both"  # Helios chooses per round


def test_the_servers_speculative_method_is_the_default_a_request_overrides():
    assert _served_method({}, default="ngram") == "ngram"
    assert _served_method({"speculative_method": "mtp"}, default="ngram") == "mtp"
    assert _served_method({}, default="both") == "both"


def test_an_unknown_speculative_method_is_a_400():
    engine = ScriptedEngine()

    async def go():
        async with client(engine) as c:
            return await c.post("/v1/completions", json={"prompt": "x", "speculative_method": "x"})

    response = run(go())
    assert response.status_code == 400
    assert "speculative_method" in response.text
