"""``ignition simulate --trace``: tables, JSON, plots, and one-line errors (issue 12 item 5)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ignition.cli import main

TRACE = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
    f"2023-11-16 18:15:{10 + i:02d}.5000000,{200 + 97 * i},{3 + 2 * i}\n" for i in range(12)
)


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text(TRACE)
    return str(path)


def run(*args: str):
    return CliRunner().invoke(main, ["simulate", *args])


SMALL = ("--slots", "4", "--speculative-token-capacity", "6", "--rows", "0:12")


def test_compare_prints_one_row_per_policy_with_helios_first(trace):
    result = run("--trace", trace, "--rate", "2", "--compare", "vllm,sarathi", *SMALL)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("│")]
    assert [line.split("│")[1].strip() for line in lines[:3]] == ["helios", "vllm", "sarathi"]


def test_json_reports_percentiles_and_device_time_for_every_policy(trace):
    result = run("--trace", trace, "--rate", "2", "--compare", "vllm-k3", "--json", *SMALL)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert [r["policy"] for r in report["results"]] == ["helios", "vllm-k3"]
    for r in report["results"]:
        assert r["finished"] == 12 and r["ttft_ms"]["p99"] >= r["ttft_ms"]["p50"] > 0
        assert r["device_ms_by_class"]["ordinary"] > 0


def test_capacity_search_reports_a_rate_per_policy_and_slo(trace):
    result = run(
        "--trace", trace, "--capacity", "--slo", "-:5", "--compare", "vllm", "--json", *SMALL
    )
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)["capacity"]
    assert {c["policy"] for c in found} == {"helios", "vllm"}
    assert all(c["rate"] > 0 for c in found)


def test_plot_writes_latency_and_graph_mix_pngs(trace, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "plots"
    result = run(
        "--trace", trace, "--sweep", "1,2", "--compare", "vllm", "--plot", str(out), *SMALL
    )
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in out.iterdir())
    assert names == ["graph_mix_helios.png", "graph_mix_vllm.png", "latency_vs_load.png"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--rate", "-1"), "--rate = -1: must be a positive load scale"),
        (("--rate", "1", "--compare", "vllm,orca"), "unknown policy 'orca'"),
        (("--sweep", "1,x"), "--sweep '1,x': expected comma-separated numbers"),
        (("--rate", "1", "--device", "tpu"), "unknown device profile 'tpu'"),
        (("--rate", "1", "--tasks", "chat:1,poems:1"), "unknown task 'poems'"),
        (("--rate", "1", "--confidence", "oracle"), "confidence 'oracle'"),
    ],
)
def test_bad_input_is_one_line_naming_it(trace, args, message):
    result = run("--trace", trace, *args)
    assert result.exit_code == 2
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_a_task_mix_a_profile_and_the_new_baselines_run_through_the_one_command(trace):
    result = run(
        "--trace",
        trace,
        *SMALL,
        "--rate",
        "1",
        "--json",
        "--tasks",
        "conv",
        "--confidence",
        "eagle2",
        "--device",
        "qwen38-flash-next-4xh100",
        "--compare",
        "vllm-adaptive-padded,sglang-tiers,vllm-dyn",
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert {r["policy"] for r in report["results"]} == {
        "helios",
        "vllm-adaptive-padded",
        "sglang-tiers",
        "vllm-dyn",
    }
    assert report["setup"]["acceptance"] == "conv"


def test_a_trace_missing_a_column_is_one_line_naming_it(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("TIMESTAMP,GeneratedTokens\n2023-11-16 18:15:46.0,3\n")
    result = run("--trace", str(path), "--rate", "1")
    assert result.exit_code == 2
    assert result.output.strip() == f"error: {path}: missing column 'ContextTokens'"
