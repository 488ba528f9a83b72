"""`ignition serve CHECKPOINT` end to end: built once into the cache, reused, rebuilt when
the entry is broken; the vLLM flags on a real server (tiny random checkpoint, CPU)."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from ignition.compiler.build_cache import MARKER
from tests.checkpoints import write_tiny_checkpoint
from tests.server.conftest import server_process

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# Few programs: one slot, no speculation (the build validates each program on CPU).
SMALL = ("--max-num-seqs", "1", "--speculation", "off")
TOOLS_TEMPLATE = (
    "[custom]{% for t in tools or [] %}<tool>{{ t.function.name }}</tool>{% endfor %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "<|im_start|>assistant\n"
)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return write_tiny_checkpoint(tmp_path_factory.mktemp("served-checkpoint"))


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


def serve(checkpoint, cache, logs, *args):
    return server_process(
        checkpoint,
        "serve",
        "--cache-dir",
        str(cache),
        *SMALL,
        *args,
        positional=True,
        log_dir=logs,
    )


def entries(cache):
    return sorted(p for p in (cache / "bundles").iterdir())


def test_a_checkpoint_is_built_on_the_first_start_and_reused_on_the_second(
    checkpoint, cache, tmp_path
):
    with serve(checkpoint, cache, tmp_path) as (url, _process, log):
        reply = httpx.post(f"{url}/v1/completions", json={"prompt": "import os", "max_tokens": 3})
        first = log.read_text()
    assert reply.status_code == 200, reply.text
    assert "building" in first and "preparing programs" in first
    [entry] = entries(cache)
    with serve(checkpoint, cache, tmp_path) as (_url, _process, log):
        second = log.read_text()
    assert f"reusing the cached build {entry}" in second
    assert "preparing programs" not in second  # no build: only the runtime's preparation
    assert entries(cache) == [entry]


def test_a_cache_entry_without_its_marker_is_rebuilt_before_serving(checkpoint, cache, tmp_path):
    with serve(checkpoint, cache, tmp_path):
        pass
    [entry] = entries(cache)
    (entry / MARKER).unlink()
    with serve(checkpoint, cache, tmp_path) as (_url, _process, log):
        text = log.read_text()
    assert "the cached entry was unusable" in text and "did not finish" in text
    assert (entry / MARKER).exists()


def test_chat_template_and_served_model_name_and_vllm_metrics_on_a_real_server(
    checkpoint, cache, tmp_path
):
    args = ("--chat-template", TOOLS_TEMPLATE, "--served-model-name", "tiny",
            "--tool-call-parser", "hermes", "--enable-auto-tool-choice")  # fmt: skip
    with serve(checkpoint, cache, tmp_path, *args, "--metrics-names", "vllm") as (url, _p, _l):
        tool = {"type": "function", "function": {"name": "lookup"}}
        body = {
            "model": "tiny",
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [tool],
            "max_tokens": 2,
        }
        chat = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120)
        rendered = httpx.post(f"{url}/tokenize", json={"messages": body["messages"]})
        detokenized = httpx.post(f"{url}/detokenize", json={"tokens": rendered.json()["tokens"]})
        metrics = httpx.get(f"{url}/metrics").text
    assert chat.status_code == 200, chat.text  # this template renders tools
    assert chat.json()["model"] == "tiny"
    assert detokenized.json()["prompt"].startswith("[custom]user")  # special tokens skipped
    assert 'vllm:e2e_request_latency_seconds_count{model_name="tiny"} 1.0' in metrics


def test_more_slots_than_a_bundle_was_built_for_is_a_one_line_error(checkpoint, cache):
    with serve(checkpoint, cache, cache):
        pass
    [entry] = entries(cache)
    command = [sys.executable, "-m", "ignition.cli", "serve", str(entry), "--max-num-seqs", "3"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 2
    assert "--max-num-seqs = 3" in result.stderr and "built for 1 request slots" in result.stderr
    assert "Traceback" not in result.stderr
