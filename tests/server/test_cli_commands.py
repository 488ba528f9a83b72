"""`ignition build`, `generate` and `serve` as a user runs them, on the tiny checkpoint."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.checkpoints import write_tiny_checkpoint
from tests.server.conftest import server_process

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def ignition(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "ignition.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def test_build_writes_a_bundle_and_reports_its_programs(tmp_path):
    checkpoint = write_tiny_checkpoint(tmp_path / "checkpoint")
    out = tmp_path / "bundle"
    args = ("--speculation", "off", "--concurrency", "1")  # the family's recipe: qwen38
    result = ignition("build", *args, "--weights", str(checkpoint), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].startswith(f"built {out}: ")  # progress: stderr
    assert "preparing programs" in result.stderr
    assert (out / "manifest.json").exists() and (out / "build_report.md").exists()


def test_generate_prints_what_it_loads_then_the_completion(bundle):
    common = ("--artifacts", str(bundle), "--prompt", "import os", "--threads", "1")
    shown = ignition("generate", *common, "--max-tokens", "4")
    assert shown.returncode == 0, shown.stderr
    assert "loaded qwen38" in shown.stderr and "preparing" in shown.stderr
    quiet = ignition("generate", *common, "--max-tokens", "4", "--json")
    assert "loaded" not in quiet.stderr  # --json prints nothing but the JSON
    report = json.loads(quiet.stdout)
    assert 1 <= len(report["token_ids"]) <= 4
    assert report["finish_reason"] in ("length", "stop")


def test_serve_prints_what_it_loads_and_the_address_it_listens_on(bundle):
    with server_process(bundle, "serve") as (url, _process, log):
        text = log.read_text()
    assert "loaded qwen38" in text
    assert f"listening on {url}" in text
    assert text.index("loaded qwen38") < text.index("listening on")


def test_a_context_beyond_the_model_is_a_one_line_error(bundle):
    result = ignition("serve", "--artifacts", str(bundle), "--max-context", "100000")
    assert result.returncode == 2
    assert "--max-context = 100000 exceeds" in result.stderr
    assert "Traceback" not in result.stderr
