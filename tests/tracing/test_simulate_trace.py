"""``ignition simulate --trace-file``: the simulated Helios run in the served run's format."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from click.testing import CliRunner

from ignition.cli import main
from tests.tracing.trace_schema import schema_errors

TRACE = Path(__file__).parents[2] / "ignition" / "simulate" / "traces" / "azure-llm-2023" / "code.csv"
ARGS = ["simulate", "--trace", str(TRACE), "--rows", "0:12", "--rate", "1", "--compare", ""]


def test_a_simulated_run_writes_the_same_trace_format(tmp_path):
    path = tmp_path / "sim.json"
    result = CliRunner().invoke(main, [*ARGS, "--trace-file", str(path)])
    assert result.exit_code == 0, result.output
    document = json.loads(path.read_text())
    assert schema_errors(document) == []
    events = document["traceEvents"]
    requests = {e["args"]["name"] for e in events if e["name"] == "thread_name" and e["pid"] == 2}
    assert requests == {f"request {i}" for i in range(12)}
    names = Counter(e["name"] for e in events if e["ph"] == "X" and e["pid"] == 2)
    assert names["wait for slot"] == 12 and names["prefill chunk"] >= 12
    frames = [e for e in events if e["ph"] == "X" and e["pid"] == 1]
    assert frames and all(f["args"]["reason"] for f in frames)
    assert {e["name"] for e in events if e["ph"] == "C"} >= {"queue", "pages", "prices"}


def test_trace_file_with_a_sweep_is_refused_by_name(tmp_path):
    args = [*ARGS[:-4], "--sweep", "1,2", "--trace-file", str(tmp_path / "t.json")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "--trace-file records one run" in result.output
