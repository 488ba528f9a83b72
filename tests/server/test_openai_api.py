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
    full = greedy(client, max_tokens=12, logprobs=1).choices[0]
    auth = {"Authorization": f"Bearer {KEY}"}
    for piece in full.logprobs.tokens:  # a generated token whose text is that token alone
        ids = httpx.post(f"{url}/tokenize", json={"prompt": piece}, headers=auth).json()["tokens"]
        if len(ids) == 1 and "\ufffd" not in piece:
            break
    stopped = greedy(client, max_tokens=12, stop_token_ids=[ids[0]]).choices[0]
    assert stopped.finish_reason == "stop"
    assert stopped.model_extra["stop_reason"] == ids[0]
    assert len(stopped.text) < len(full.text)


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


# -- issue 15: logprobs, best_of and the device sampling options ----------------------


def test_completion_logprobs_come_in_openais_legacy_shape(client):
    choice = greedy(client, max_tokens=6, logprobs=2).choices[0]
    lp = choice.logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.text_offset) == 6
    assert all(v <= 0 for v in lp.token_logprobs)
    assert lp.text_offset[0] == 0
    for i in range(5):
        assert lp.text_offset[i + 1] == lp.text_offset[i] + len(lp.tokens[i])
    for token, value, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs, strict=True):
        assert 2 <= len(top) <= 3 and top[token] == pytest.approx(value)
        assert max(top.values()) >= value  # greedy: the chosen token is the most likely


def test_completion_logprobs_stream_the_same_values(client):
    whole = greedy(client, max_tokens=6, logprobs=1).choices[0].logprobs
    chunks = client.completions.create(
        model="tiny",
        prompt=PROMPT,
        max_tokens=6,
        temperature=0,
        logprobs=1,
        stream=True,
        extra_body={"ignore_eos": True},
    )
    streamed = [c.choices[0].logprobs for c in chunks if c.choices and c.choices[0].logprobs]
    assert [t for lp in streamed for t in lp.tokens] == whole.tokens
    values = [v for lp in streamed for v in lp.token_logprobs]
    assert values == pytest.approx(whole.token_logprobs, abs=1e-4)  # other programs ran it
    assert [o for lp in streamed for o in lp.text_offset] == whole.text_offset


def test_chat_logprobs_and_top_logprobs_streaming_and_not(client):
    ask = dict(
        model="tiny",
        messages=[{"role": "user", "content": "hello"}],
        max_tokens=5,
        temperature=0,
        logprobs=True,
        top_logprobs=2,
        extra_body={"ignore_eos": True},
    )
    content = client.chat.completions.create(**ask).choices[0].logprobs.content
    assert len(content) == 5
    for entry in content:
        assert entry.bytes == list(entry.token.encode("utf-8"))
        assert len(entry.top_logprobs) == 2
        assert entry.top_logprobs[0].logprob >= entry.top_logprobs[1].logprob
        assert entry.top_logprobs[0].logprob == pytest.approx(entry.logprob)  # greedy
    chunks = list(client.chat.completions.create(**ask, stream=True))
    streamed = [
        e
        for c in chunks
        if c.choices and c.choices[0].logprobs
        for e in c.choices[0].logprobs.content
    ]
    assert [e.token for e in streamed] == [e.token for e in content]
    assert [e.logprob for e in streamed] == pytest.approx([e.logprob for e in content], abs=1e-4)
    plain = client.chat.completions.create(**{**ask, "logprobs": False, "top_logprobs": None})
    assert plain.choices[0].logprobs is None


def test_best_of_returns_the_candidates_with_the_highest_cumulative_logprob(client):
    ask = dict(model="tiny", prompt=PROMPT, max_tokens=5, temperature=1.0, seed=7)
    ask["extra_body"] = {"ignore_eos": True}
    candidates = client.completions.create(**ask, n=4, logprobs=0).choices
    totals = sorted((sum(c.logprobs.token_logprobs), c.text) for c in candidates)
    best = client.completions.create(**ask, n=2, best_of=4)
    assert [c.index for c in best.choices] == [0, 1]
    assert [c.text for c in best.choices] == [totals[-1][1], totals[-2][1]]
    assert all(c.logprobs is None for c in best.choices)
    assert best.usage.completion_tokens == 20  # every candidate was generated
    with pytest.raises(openai.BadRequestError):
        client.completions.create(**ask, n=1, best_of=2, stream=True)


def test_logit_bias_through_the_client_and_its_keys_checked_against_the_vocabulary(client, url):
    forced = client.completions.create(
        model="tiny",
        prompt=PROMPT,
        max_tokens=4,
        temperature=0,
        logprobs=0,
        logit_bias={"40": 100},
        extra_body={"ignore_eos": True},
    ).choices[0]
    auth = {"Authorization": f"Bearer {KEY}"}
    text = httpx.post(f"{url}/detokenize", json={"tokens": [40]}, headers=auth).json()["prompt"]
    assert forced.logprobs.tokens == [text] * 4
    with pytest.raises(openai.BadRequestError) as err:
        client.completions.create(model="tiny", prompt=PROMPT, max_tokens=2, logit_bias={"512": 1})
    assert err.value.body["param"] == "logit_bias"
    assert "'512'" in err.value.body["message"]


def test_penalties_and_min_p_are_accepted_and_change_greedy_output(client):
    prompt = "import os\nimport os\nimport os\n"  # its greedy continuation repeats itself
    plain = greedy(client, prompt, 12).choices[0].text
    assert greedy(client, prompt, 12, repetition_penalty=1.5).choices[0].text != plain
    penalized = client.completions.create(
        model="tiny",
        prompt=prompt,
        max_tokens=12,
        temperature=0,
        frequency_penalty=1.5,
        extra_body={"ignore_eos": True},
    )
    assert penalized.choices[0].text != plain
    # greedy decoding is min_p-invariant, and min_tokens only holds EOS back (ignored here)
    assert greedy(client, prompt, 12, min_p=0.5, min_tokens=3).choices[0].text == plain
