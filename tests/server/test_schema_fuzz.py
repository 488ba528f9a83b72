"""Schemathesis against /openapi.json: every check on, a fixed example budget, 0 server errors.

Two built-in checks are replaced by stricter versions of themselves that know what
JSON Schema cannot say: positive_data_acceptance allows only the 400s listed in
BEYOND_THE_SCHEMA, and not_a_server_error allows only the documented overload (503
with Retry-After), which fuzzing with up to 64 prompts x 16 choices does reach.

The app runs in-process over the real engine loop and Helios with the scripted
worker (tests/runtime/scripted.py), so generated requests reach admission,
scheduling and publication without a model.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import positive_data_acceptance

from ignition.runtime.async_engine import AsyncEngine
from ignition.server.app import create_app
from tests.runtime.scripted import make_engine

engine, _worker = make_engine(max_waiting=64)
engine.vocab_size = 26
bridge = AsyncEngine(
    engine,
    model_name="scripted",
    encode=lambda text: [ord(c) % 26 for c in text] or [0],
    default_max_tokens=8,
)
schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(bridge))
# What JSON Schema cannot say: token counts against the context, valid Unicode (no lone
# surrogates), the chat template's own rules, logit_bias keys against the vocabulary,
# min_tokens against max_tokens, prompt_logprobs on this scripted worker (which cannot
# score prompts), image parts (a text-only model refuses them; no schema says which bytes
# decode as an image), and tool_choice against the tools given and the server's tool-call
# flags, and structured outputs (a schema, regex or grammar xgrammar cannot compile, at
# most one constraint per request, an engine without a grammar compiler). A schema-valid
# request may get a 400 for these only (an image error names its part,
# ``messages[i].content[j].image_url``).
BEYOND_THE_SCHEMA = (
    "context",
    "lone surrogate",
    "chat template",
    "logit_bias key",
    "min_tokens",
    "prompt_logprobs",
    ".image_url",
    "tool_choice",
    "structured output",
)


@schemathesis.check
def valid_data_is_accepted_unless_beyond_the_schema(ctx, response, case):
    """positive_data_acceptance, with the documented 400s above and 503 (queue full)."""
    if case.meta is None or not case.meta.generation.mode.is_positive:
        return None
    if response.status_code == 400:
        message = response.json()["error"]["message"]
        assert any(reason in message for reason in BEYOND_THE_SCHEMA), message
    elif response.status_code == 404:  # /v1/models/{id} for a name that is not served
        assert case.operation.path == "/v1/models/{model_id}", response.text
    else:
        assert response.status_code < 300 or response.status_code == 503, response.text
    return None


@pytest.fixture(scope="module", autouse=True)
def engine_thread():
    bridge.start()
    yield
    bridge.stop()


@schemathesis.check
def no_server_error_but_a_documented_overload(ctx, response, case):
    """not_a_server_error, except 503 with Retry-After: a full queue under fuzzing load."""
    if response.status_code == 503:
        assert response.headers.get("retry-after") == ["1"], response.headers
        assert response.json()["error"]["type"] == "server_overloaded", response.text
    else:
        assert response.status_code < 500, response.text
    return None


@schema.parametrize()
@settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_the_api_conforms_to_its_schema_with_no_server_errors(case):
    case.call_and_validate(
        excluded_checks=[positive_data_acceptance, not_a_server_error],
        additional_checks=[
            valid_data_is_accepted_unless_beyond_the_schema,
            no_server_error_but_a_documented_overload,
        ],
    )
