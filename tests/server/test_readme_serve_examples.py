"""The README's serve examples, run as written against a served default (issue 38).

Each example block the README marks ``<!-- serve-example:NAME -->`` is parsed by bash
itself (``ignition`` and ``curl`` defined as functions that record their arguments), so
what runs here is what a reader pastes. One server serves them all: the embedded default
(qwen38-tiny) built as the quick start builds it, started with the tool section's own
flags (``--enable-auto-tool-choice --reasoning-parser qwen3``); every request goes to it
as its ``curl`` line says, and must answer 200 with the shape the README documents. This
is what caught the forced tool call and the JSON schema failing under the reasoning
parser (the tiny model never closes ``</think>`` by itself: 3.2).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import jsonschema_rs
import pytest

from tests.server.conftest import server_process

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
README = Path(__file__).resolve().parents[2] / "README.md"
EXAMPLE = re.compile(r"<!-- serve-example:([\w-]+) -->\n\s*```bash\n(.*?)\n\s*```", re.S)
EXAMPLES = ("completions", "chat-tools", "serve-tools", "tool-named", "json-schema")
QUICK_START_BUNDLE = "artifacts/qwen38"  # what quickstart:main builds and generates from


def examples() -> dict[str, str]:
    return {name: textwrap.dedent(block) for name, block in EXAMPLE.findall(README.read_text())}


def commands(block: str, scratch: Path) -> list[list[str]]:
    """The block's ``ignition`` and ``curl`` commands as bash parses them (argv lists)."""
    scratch.mkdir(parents=True, exist_ok=True)
    script = "\n".join(
        [
            "n=0",
            f'record() {{ n=$((n+1)); printf "%s\\0" "$@" > "{scratch}/$n"; }}',
            'ignition() { record ignition "$@"; }',
            'curl() { record curl "$@"; }',
            block.replace(".venv/bin/ignition", "ignition"),
        ]
    )
    subprocess.run(["bash", "-c", script], check=True, timeout=30)
    files = sorted(scratch.iterdir(), key=lambda f: int(f.name))
    return [f.read_bytes().decode().split("\0")[:-1] for f in files]


def option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


@pytest.fixture(scope="module")
def parsed(tmp_path_factory) -> dict[str, list[list[str]]]:
    scratch = tmp_path_factory.mktemp("readme")
    found = examples()
    assert set(EXAMPLES) <= set(found), f"README.md lacks serve-example markers: {found.keys()}"
    return {name: commands(found[name], scratch / name) for name in EXAMPLES}


@pytest.fixture(scope="module")
def server(parsed, tmp_path_factory):
    """The embedded default built as the quick start builds it (without mixed programs, to
    keep the build short), served with the tool section's flags."""
    out = tmp_path_factory.mktemp("qwen38")
    build = [sys.executable, "-m", "ignition.cli", "build", "--recipe", "qwen3.8-flash"]
    subprocess.run([*build, "--out", str(out), "--device", "cpu"], check=True,
                   capture_output=True, timeout=600)  # fmt: skip
    (serve,) = parsed["serve-tools"]
    flags = serve[2:]
    flags[flags.index("--artifacts") + 1] = str(out)
    with server_process(out, "serve", *flags, as_given=True) as (url, _process, _log):
        yield url


def ask(server: str, curl: list[str]) -> dict:
    """Send the request a README ``curl`` line describes to ``server``; its JSON body."""
    (url,) = [a for a in curl if "localhost:8000" in a]
    assert option(curl, "-H") == "content-type: application/json"
    path = urlsplit(f"http://{url.removeprefix('http://')}").path
    response = httpx.post(server + path, json=json.loads(option(curl, "-d")), timeout=300)
    assert response.status_code == 200, response.text
    return response.json()


def test_the_serve_examples_serve_the_bundle_the_quick_start_builds(parsed):
    quick_serve = parsed["completions"][0]
    assert quick_serve[:3] == ["ignition", "serve", QUICK_START_BUNDLE]
    (serve,) = parsed["serve-tools"]
    assert option(serve, "--artifacts") == QUICK_START_BUNDLE
    main = re.search(r"<!-- quickstart:main -->\s*```bash\n(.+?)\n```", README.read_text())
    assert main and f"generate --artifacts {QUICK_START_BUNDLE} " in main.group(1)


def test_the_completions_example_returns_text(server, parsed):
    _serve, curl = parsed["completions"]
    body = ask(server, curl)
    (choice,) = body["choices"]
    assert isinstance(choice["text"], str) and choice["finish_reason"] in ("stop", "length")
    assert 0 < body["usage"]["completion_tokens"] <= 32


def test_the_chat_template_kwargs_example_returns_an_assistant_message(server, parsed):
    (curl,) = parsed["chat-tools"]
    message = ask(server, curl)["choices"][0]["message"]
    assert message["role"] == "assistant"
    for call in message.get("tool_calls") or []:
        assert call["function"]["name"] == "get_weather"


def test_the_named_tool_example_returns_a_call_of_it(server, parsed):
    (curl,) = parsed["tool-named"]
    (choice,) = ask(server, curl)["choices"]
    (call,) = choice["message"]["tool_calls"]
    assert call["type"] == "function" and call["function"]["name"] == "get_weather"
    assert isinstance(json.loads(call["function"]["arguments"])["city"], str)
    assert choice["finish_reason"] in ("tool_calls", "length")


def test_the_json_schema_example_returns_content_that_validates(server, parsed):
    (curl,) = parsed["json-schema"]
    request = json.loads(option(curl, "-d"))
    (choice,) = ask(server, curl)["choices"]
    schema = request["response_format"]["json_schema"]["schema"]
    jsonschema_rs.validate(schema, json.loads(choice["message"]["content"]))
    assert choice["finish_reason"] == "stop"


def test_chat_tokenize_counts_the_tokens_the_chat_request_is_given(server):
    """/tokenize renders messages with the request's chat_template_kwargs (3.3)."""
    messages = [{"role": "user", "content": "Weather in Oslo?"}]
    kwargs = {"enable_thinking": False}
    chat = {"messages": messages, "max_tokens": 1, "chat_template_kwargs": kwargs}
    used = httpx.post(f"{server}/v1/chat/completions", json=chat, timeout=60).json()
    tokenize = {"messages": messages, "chat_template_kwargs": kwargs}
    counted = httpx.post(f"{server}/tokenize", json=tokenize, timeout=60).json()
    assert counted["count"] == used["usage"]["prompt_tokens"]
