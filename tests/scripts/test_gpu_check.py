"""scripts/gpu_check.sh --dry-run: the GPU check's own plumbing runs on CPU (issue 16)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = ("kernels", "capture", "replay", "overlap", "greedy", "ple", "qsa")


def test_the_gpu_check_dry_run_prints_one_passing_table_with_every_section(tmp_path):
    env = {**os.environ, "PY": sys.executable, "OUT": str(tmp_path)}
    result = subprocess.run(
        ["bash", "scripts/gpu_check.sh", "--dry-run"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + (tmp_path / "gpu_check.stderr").read_text()
    lines = result.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("section"))
    rows = [line.split(" | ") for line in lines[header + 1 :] if " | " in line]
    assert {row[0].strip() for row in rows} == set(SECTIONS)
    assert all(row[2].strip() == "pass" for row in rows)
    assert "0 failed" in lines[-1]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU refusal")
def test_without_a_gpu_the_full_check_refuses_to_start():
    sys.path.insert(0, str(ROOT))
    from scripts.gpu_check import main

    assert main([]) == 2
