"""The embedded default (qwen38-tiny) built once for the replica tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EMBEDDED = Path(__file__).resolve().parents[2] / "ignition" / "assets" / "qwen38-tiny"


@pytest.fixture(scope="session")
def embedded_bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("embedded-bundle")
    command = [sys.executable, "-m", "ignition.cli", "build", "--weights", str(EMBEDDED),
               "--out", str(out), "--device", "cpu", "--threads", "1"]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, timeout=900)
    return out
