"""A built bundle of a small random checkpoint, and real server processes over it."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.checkpoints import write_tiny_checkpoint


@pytest.fixture(scope="session")
def bundle(tmp_path_factory) -> Path:
    """qwen38 with --mixed-prefill: four request slots, a 4096-token prefill capacity."""
    # seed 12: greedy continuations repeat tokens, which the penalty tests need to change
    checkpoint = write_tiny_checkpoint(tmp_path_factory.mktemp("checkpoint"), seed=12)
    out = tmp_path_factory.mktemp("bundle")
    command = [
        sys.executable,
        "-m",
        "ignition.cli",
        "build",
        # no --recipe: the qwen4_exp test checkpoint resolves to the qwen38 recipe
        "--mixed-prefill",
        "--weights",
        str(checkpoint),
        "--out",
        str(out),
        "--device",
        "cpu",
    ]
    subprocess.run(command, check=True, capture_output=True, timeout=900)
    return out


SPECULATION_MODES = ("off", "fixed", "adaptive")


@pytest.fixture(scope="session", params=SPECULATION_MODES)
def grammar_server(bundle, request) -> Iterator[str]:
    """One real server per speculation mode (``--served-model-name x``), shared by the
    structured-output and forced-tool-call modules: pytest groups their tests by mode, so
    the suite starts three servers for both. The bundle's chat template renders the
    qwen3_coder call format, detected without flags."""
    args = ("--served-model-name", "x", "--speculation", request.param)
    with running_server(bundle, "serve", *args) as url:
        # The first grammar opens the compiler (xgrammar imports transformers: seconds,
        # once per server); paid here, not by whichever test comes first.
        warm = {"prompt": "x", "max_tokens": 2, "guided_choice": ["a"]}
        httpx.post(f"{url}/v1/completions", json=warm, timeout=120).raise_for_status()
        yield url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_server(bundle: Path, command: str, *args: str) -> Iterator[str]:
    """Start `ignition <command>` on a free loopback port; yield its URL once healthy."""
    with server_process(bundle, command, *args) as (url, _process, _log):
        yield url


@contextlib.contextmanager
def server_process(
    bundle: Path,
    command: str,
    *args: str,
    env: dict[str, str] | None = None,
    positional: bool = False,
    log_dir: Path | None = None,
    as_given: bool = False,
) -> Iterator[tuple[str, subprocess.Popen, Path]]:
    """Like running_server, also yielding the process and its log file. ``positional``
    passes the bundle (or checkpoint) as PATH instead of ``--artifacts``; the log goes to
    ``log_dir`` (default: the bundle folder). ``as_given``: ``args`` are the whole command
    line after ``command`` (the bundle included), only ``--port`` is added."""
    port = free_port()
    target = [str(bundle)] if positional else ["--artifacts", str(bundle)]
    defaults = [*target, "--threads", "1", "--max-context", "6144"]
    argv = [
        sys.executable,
        "-m",
        "ignition.cli",
        command,
        *([] if as_given else defaults),
        "--port",
        str(port),
        *args,
    ]
    log_path = (log_dir or bundle) / f"server-{port}.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 300
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"server exited early:\n{log_path.read_text()}")
                if time.monotonic() > deadline:
                    raise RuntimeError("server did not become healthy within 300 s")
                with contextlib.suppress(httpx.TransportError):
                    if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                        break
                time.sleep(0.25)
            yield url, process, log_path
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
