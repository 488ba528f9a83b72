"""The PLE flags, the build report's table line and the /metrics series (docs/ple.md)."""

from __future__ import annotations

import pytest
import torch
from click.testing import CliRunner
from jinja2 import Environment, PackageLoader, StrictUndefined

from ignition.cli import main
from ignition.runtime.loop.stats import EngineStats
from ignition.runtime.ple.delivery import PleOptions, describe_table, open_ple, parse_bytes
from ignition.runtime.ple.table import TABLE_FOLDER, write_table
from ignition.server.metrics import ServerMetrics


def one_line(result, text: str) -> None:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and text in lines[0], result.output


@pytest.mark.parametrize(
    ("flag", "bad", "text"),
    [
        ("--ple-residency", "gpu", "--ple-residency = 'gpu': one of device, host, disk"),
        ("--ple-cache-bytes", "lots", "--ple-cache-bytes = 'lots'"),
        ("--ple-cache-bytes", "-1", "--ple-cache-bytes = '-1'"),
    ],
)
@pytest.mark.parametrize("command", ["build", "serve"])
def test_bad_ple_flags_are_one_line_errors_naming_the_flag(tmp_path, command, flag, bad, text):
    where = ["--artifacts", str(tmp_path)] if command == "serve" else ["--recipe", "qwen38"]
    one_line(CliRunner().invoke(main, [command, *where, flag, bad]), text)


@pytest.mark.parametrize("command", ["build", "serve"])
def test_build_and_serve_take_the_ple_flags(command):
    help_text = CliRunner().invoke(main, [command, "--help"]).output
    for flag in ("--ple-residency", "--ple-preload", "--ple-cache-bytes"):
        assert flag in help_text


def test_cache_bytes_take_units():
    assert parse_bytes("4GiB") == 4 << 30
    assert parse_bytes("512MiB") == 512 << 20
    assert parse_bytes("2G") == 2_000_000_000
    assert parse_bytes("123") == 123


def report(ple: dict) -> str:
    env = Environment(loader=PackageLoader("ignition", "templates"), undefined=StrictUndefined)
    manifest = {
        "recipe": "r", "built_at": "t", "device": "cpu", "captured": False, "options": {},
        "checkpoint": {"path": "p", "sha256": "0" * 64}, "packages": {}, "counts": {},
        "programs": [], "max_packed_extent": 1, "reused": 0, "state_operations": [], "ple": ple,
    }  # fmt: skip
    return env.get_template("build_report.md.j2").render(manifest=manifest)


def test_the_build_report_says_when_there_is_no_ple_table():
    assert "PLE n-gram table: no PLE table." in report(describe_table(PleOptions("disk"), None))


def test_the_build_report_states_the_table_size_and_residency(tmp_path):
    layout = write_table(tmp_path, [torch.zeros(1024, 160, dtype=torch.bfloat16)] * 2)
    text = report(describe_table(PleOptions("disk", cache_bytes=1 << 29), layout, "disk"))
    assert "0.00 GiB (2048 rows of 160 bfloat16 values in 2 shards)" in text
    assert "residency `disk`, row cache 0.50 GiB" in text


def test_a_checkpoint_without_a_table_opens_as_residency_none(tmp_path):
    ple = open_ple(tmp_path, PleOptions("host", preload=True), torch.device("cpu"))
    assert ple.store is None and ple.residency == "none"


def test_a_checkpoint_table_opens_at_the_default_residency(tmp_path):
    write_table(tmp_path / TABLE_FOLDER, [torch.zeros(8, 4)])
    ple = open_ple(tmp_path, PleOptions(), torch.device("cpu"))
    assert ple.residency == "device"  # small, on CPU: device and host are one memory
    assert ple.stats.snapshot().table_bytes == 8 * 4 * 4


def test_metrics_report_no_ple_table_as_residency_none():
    text = ServerMetrics(EngineStats(), "m").render().decode()
    assert 'flare_ple_table_bytes{model_name="m",residency="none"} 0.0' in text


def test_metrics_carry_the_delivery_counters_by_residency(tmp_path):
    write_table(tmp_path / TABLE_FOLDER, [torch.arange(32.0).view(8, 4)])
    ple = open_ple(tmp_path, PleOptions("disk", cache_bytes=64), torch.device("cpu"))
    out = torch.empty(3, 4)
    ple.store.gather(torch.tensor([1, 2, 1]), out)  # two distinct rows: two misses
    ple.store.gather(torch.tensor([1]), out[:1])  # a hit
    ple.stats.add_frame(1500)
    stats = EngineStats()
    stats.ple = ple.stats
    text = ServerMetrics(stats, "m").render().decode()
    labels = '{model_name="m",residency="disk"}'
    assert f"flare_ple_rows_gathered_total{labels} 4.0" in text
    assert f"flare_ple_cache_hits_total{labels} 1.0" in text
    assert f"flare_ple_cache_misses_total{labels} 2.0" in text
    assert f"flare_ple_exposed_delivery_nanoseconds_total{labels} 1500.0" in text
    assert f"flare_ple_bytes_moved_total{labels} 32.0" in text


def test_serve_keeps_the_residency_the_build_chose_unless_it_names_one(tmp_path):
    from types import SimpleNamespace

    from ignition.serving.ple import open_table

    write_table(tmp_path / TABLE_FOLDER, [torch.zeros(8, 4)])
    manifest = {"checkpoint": {"path": str(tmp_path)}, "ple": {"residency": "disk"}}
    bundle = SimpleNamespace(manifest=manifest, path=tmp_path, model=None)
    cpu = torch.device("cpu")
    assert open_table(bundle, PleOptions(), cpu).residency == "disk"
    assert open_table(bundle, PleOptions("host"), cpu).residency == "host"
