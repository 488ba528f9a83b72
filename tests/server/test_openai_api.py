"""The vLLM-compatible API surface, driven with the official ``openai`` client.

One real server on loopback with two served names and an API key; the model is
the tiny random checkpoint, so tests compare responses with each other (greedy
decoding is deterministic) rather than with fixed text.
"""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.server.conftest import running_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
KEY = "test-key"
PROMPT = [10, 11, 12, 13]


@pytest.fixture(scope="module")
def url(bundle):
    args = ("--served-model-name", "tiny", "--served-model-name", "alias", "--api-key", KEY)
    with running_server(bundle, "serve", *args) as url:
        yield url


@pytest.fixture(scope="module")
def client(url) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=120)


def greedy(client, prompt=PROMPT, max_tokens=8, **extra):
    return client.completions.create(
        model="tiny",
        prompt=prompt,
        max_tokens=max_tokens,
        temperature=0,
        extra_body={"ignore_eos": True, **extra},
    )


def test_models_list_every_served_name_and_retrieve_one(client):
    assert [m.id for m in client.models.list().data] == ["tiny", "alias"]
    assert client.models.retrieve("alias").id == "alias"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4")


def test_an_alias_is_accepted_as_model_and_an_unknown_model_is_404(client):
    assert client.completions.create(model="alias", prompt="hi", max_tokens=2).model == "alias"
    with pytest.raises(openai.NotFoundError) as err:
        client.completions.create(model="gpt-4", prompt="hi", max_tokens=2)
    assert err.value.body["code"] == "model_not_found"


def test_a_wrong_api_key_is_401_while_health_and_metrics_stay_open(url):
    wrong = openai.OpenAI(base_url=f"{url}/v1", api_key="nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.models.list()
    assert httpx.get(f"{url}/health").status_code == 200
    assert httpx.get(f"{url}/metrics").status_code == 200


def test_n_gives_n_choices_counted_in_usage(client):
    response = client.completions.create(
        model="tiny", prompt=PROMPT, max_tokens=4, n=3, extra_body={"ignore_eos": True}
    )
    assert sorted(c.index for c in response.choices) == [0, 1, 2]
    assert response.usage.completion_tokens == 12
    assert response.usage.prompt_tokens == len(PROMPT)


def test_a_list_of_prompts_gives_one_choice_per_prompt(client):
    single = [greedy(client, p, 4).choices[0].text for p in ([1, 2, 3], [4, 5])]
    both = greedy(client, [[1, 2, 3], [4, 5]], 4)
    assert [c.text for c in sorted(both.choices, key=lambda c: c.index)] == single
    assert both.usage.prompt_tokens == 5
    texts = greedy(client, ["import os", "def f():"], 3)
    assert len(texts.choices) == 2


def test_echo_puts_the_prompt_before_the_output(client):
    plain = greedy(client, "import os\n", 4).choices[0].text
    echoed = greedy(client, "import os\n", 4, echo=True).choices[0].text
    assert echoed == "import os\n" + plain


def test_stop_strings_can_be_kept_and_name_the_stop_reason(client):
    text = greedy(client, max_tokens=12).choices[0].text
    stop = next(text[i : i + 2] for i in range(1, len(text) - 1) if text[i : i + 2].strip())
    cut = greedy(client, max_tokens=12, stop=[stop]).choices[0]
    kept = greedy(client, max_tokens=12, stop=[stop], include_stop_str_in_output=True).choices[0]
    assert cut.text == text[: text.index(stop)]
    assert kept.text == text[: text.index(stop)] + stop
    assert cut.finish_reason == "stop"
    assert cut.model_extra["stop_reason"] == stop


def test_stop_token_ids_end_the_output_at_that_token(client, url):
    first = greedy(client, max_tokens=3).choices[0].text
    ids = httpx.post(
        f"{url}/tokenize", json={"prompt": first}, headers={"Authorization": f"Bearer {KEY}"}
    ).json()["tokens"]
    stopped = greedy(client, max_tokens=12, stop_token_ids=[ids[0]]).choices[0]
    assert stopped.finish_reason == "stop"
    assert stopped.model_extra["stop_reason"] == ids[0]
    assert not stopped.text.startswith(first)


def test_continuous_usage_stats_put_usage_on_every_chunk(client):
    chunks = list(
        client.completions.create(
            model="tiny",
            prompt=PROMPT,
            max_tokens=5,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True, "stream_options": {"continuous_usage_stats": True}},
        )
    )
    with_choices = [c for c in chunks if c.choices]
    assert all(c.usage is not None for c in with_choices)
    assert chunks[-1].usage.completion_tokens == 5


def test_chat_streams_through_the_openai_client(client):
    stream = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "hello"}],
        max_tokens=4,
        stream=True,
        extra_body={"ignore_eos": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "length"


def test_tokenize_detokenize_version_and_ping(url):
    auth = {"Authorization": f"Bearer {KEY}"}
    tokens = httpx.post(f"{url}/tokenize", json={"prompt": "import os"}, headers=auth).json()
    assert tokens["count"] == len(tokens["tokens"]) and tokens["max_model_len"] == 6144
    text = httpx.post(f"{url}/detokenize", json={"tokens": tokens["tokens"]}, headers=auth)
    assert text.json() == {"prompt": "import os"}
    bad = httpx.post(f"{url}/detokenize", json={"tokens": [512]}, headers=auth)
    assert bad.status_code == 400
    assert "tokens[0] = 512" in bad.json()["error"]["message"]
    assert httpx.get(f"{url}/version").json()["version"]
    assert httpx.get(f"{url}/ping").status_code == 200


def test_metrics_carry_the_model_name_and_resource_gauges(url):
    text = httpx.get(f"{url}/metrics").text
    for name in (
        "flare_requests_running",
        "flare_requests_waiting",
        "flare_requests_swapped",
        "flare_kv_cache_usage_perc",
        "flare_state_rows_usage_perc",
        "flare_e2e_request_latency_seconds_count",
        "flare_request_queue_time_seconds_count",
        "flare_request_prefill_time_seconds_count",
        "flare_request_decode_time_seconds_count",
    ):
        assert f'{name}{{model_name="tiny"}}' in text, name
