"""`ignition recipes`, `catalog`, and the option checks of `build`, `generate`, `serve`.

Commands that need a built bundle run in tests/server/test_cli_commands.py.
"""

from __future__ import annotations

import json

import click
import pytest
import yaml
from click.testing import CliRunner

from ignition.cli import main
from ignition.recipes.registry import RECIPES_DIR


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_catalog_json_reports_22_speculative_and_20_ordinary_mixed_graphs():
    result = run("catalog", "--recipe", "qwen3.8-flash", "--mixed-prefill", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["recipe"] == "qwen38"
    assert data["options"] == {"mixed_prefill": True}
    assert data["counts"]["mixed_speculative"] == 22
    assert data["counts"]["mixed_ordinary"] == 20
    assert len(data["descriptors"]) == sum(data["counts"].values())
    assert {
        "kind",
        "batch_capacity",
        "proposal_depth",
        "token_capacity",
        "packed_capacity",
        "prefill_capacity",
        "confidence_width",
        "speculation_enabled",
        "value_source",
        "estimated_duration_ns",
        "max_packed_extent",
    } == set(data["descriptors"][0])


def test_catalog_json_follows_the_options():
    result = run("catalog", "--recipe", "qwen38", "--mixed-prefill", "--concurrency", "1", "--json")
    data = json.loads(result.output)
    assert data["options"] == {"mixed_prefill": True, "concurrency": 1}
    assert data["counts"]["mixed_ordinary"] == 0


def test_catalog_table_shows_counts_and_capture_headroom():
    result = run("catalog", "--recipe", "qwen38", "--mixed-prefill")
    assert result.exit_code == 0, result.output
    assert "mixed_speculative" in result.output
    assert "largest packed extent" in result.output
    assert "4099" in result.output


def test_check_passes_for_every_shipped_recipe():
    for name in ("qwen38", "llama32"):
        result = run("catalog", "--recipe", name, "--check")
        assert result.exit_code == 0, result.output
        assert result.output.startswith("ok")


def test_check_fails_naming_the_family_and_both_numbers(tmp_path):
    data = yaml.safe_load((RECIPES_DIR / "qwen38" / "recipe.yaml").read_text())
    data["expected_catalogs"][0]["counts"]["mixed_speculative"] = 21
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data))
    result = run("catalog", "--recipe", str(path), "--check")
    assert result.exit_code == 1
    assert "family mixed_speculative" in result.output
    assert "expects 21" in result.output and "give 22" in result.output


def test_check_with_options_needs_a_declared_expectation():
    result = run("catalog", "--recipe", "qwen38", "--concurrency", "2", "--check")
    assert result.exit_code == 2
    assert "declares no counts for options (concurrency=2)" in result.output


def test_check_with_declared_options_checks_that_entry():
    result = run(
        "catalog", "--recipe", "qwen38", "--mixed-prefill", "--speculation", "fixed", "--check"
    )
    assert result.exit_code == 0, result.output
    assert result.output.count("\n") == 1


def test_asking_for_more_than_the_recipe_is_a_one_line_error():
    result = run("catalog", "--recipe", "qwen38", "--concurrency", "65")
    assert result.exit_code == 2
    assert "--concurrency = 65" in result.output
    assert "Traceback" not in result.output


def test_mixed_prefill_on_a_dense_recipe_is_an_error():
    result = run("catalog", "--recipe", "llama3.2-1b", "--mixed-prefill")
    assert result.exit_code == 2
    assert "does not declare mixed capture" in result.output


def test_unknown_recipe_is_an_error():
    result = run("catalog", "--recipe", "nope")
    assert result.exit_code == 2
    assert "unknown recipe or alias" in result.output


def test_recipes_lists_names_aliases_and_support():
    result = run("recipes", "--json")
    assert result.exit_code == 0
    rows = {r["name"]: r for r in json.loads(result.output)}
    assert rows["qwen38"]["aliases"] == ["qwen3.8-flash", "qwen3.8-flash-next", "qwen4-exp"]
    assert rows["qwen38"]["supports"]["mixed_capture"] is True
    assert rows["llama32"]["supports"]["mixed_capture"] is False
    table = run("recipes")
    assert "qwen3.8-flash" in table.output and "mixed capture" in table.output


def test_cli_recipes_and_helios_do_not_import_torch():
    import subprocess
    import sys

    code = (
        "import sys, ignition.cli, ignition.components.capacity, ignition.helios, "
        "ignition.simulate.sim; print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_simulate_runs_a_scenario_against_helios():
    result = run("simulate", "--scenario", "examples/scenarios/h200-mixed.yaml", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["totals"]["output_tokens_per_s"] > 0
    assert report["requests"] and report["graphs"]


@pytest.mark.parametrize(
    "flag",
    [
        "--scheduler-terminal-value",
        "--scheduler-terminal-age-price",
        "--scheduler-checkpoint-extra-work-fraction",
    ],
)
@pytest.mark.parametrize("bad", ["-1", "nan", "inf"])
def test_bad_values_of_the_new_serve_flags_fail_with_one_line_naming_the_flag(tmp_path, flag, bad):
    result = run("serve", "--artifacts", str(tmp_path), flag, bad)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and flag in lines[0], result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("bad", ["-2", "nan", "inf", "1.5"])
def test_bad_snapshot_rows_fail_with_one_line_naming_the_flag(tmp_path, bad):
    result = run("serve", "--artifacts", str(tmp_path), "--snapshot-rows", bad)
    assert result.exit_code == 2
    assert f"--snapshot-rows = {bad}" in result.output
    assert len(result.output.strip().splitlines()) == 1


def _one_line_error(result, *expected: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    for text in expected:
        assert text in lines[0]


BAD_RUNTIME_OPTIONS = [
    (["serve", "--port", "0"], "--port = 0"),
    (["serve", "--port", "70000"], "--port = 70000"),
    (["serve", "--threads", "0"], "--threads = 0"),
    (["serve", "--max-context", "1"], "--max-context = 1"),
    (["serve", "--max-model-len", "0"], "--max-context = 0"),
    (["serve", "--device", "nonsense"], "--device = 'nonsense'"),
    (["serve", "--device", "cuda:99"], "--device = 'cuda:99'"),
    (["serve", "--max-request-bytes", "0"], "--max-request-bytes = 0"),
    (["generate", "--prompt", "x", "--max-tokens", "0"], "--max-tokens = 0"),
    (["generate", "--prompt", "x", "--threads", "-2"], "--threads = -2"),
    (["debug-serve", "--direct", "--port", "-1"], "--port = -1"),
]


@pytest.mark.parametrize(("args", "expected"), BAD_RUNTIME_OPTIONS)
def test_bad_runtime_options_are_one_line_errors_before_any_model_loads(tmp_path, args, expected):
    # tmp_path is an empty folder: loading it as a bundle would fail differently.
    result = run(*args[:1], "--artifacts", str(tmp_path), *args[1:])
    _one_line_error(result, expected)


def test_build_rejects_bad_threads_and_device_before_building(tmp_path):
    _one_line_error(run("build", "--recipe", "qwen38", "--threads", "0"), "--threads = 0")
    _one_line_error(run("build", "--recipe", "qwen38", "--device", "tpu"), "--device = 'tpu'")


def test_max_model_len_is_an_alias_of_max_context():
    help_text = run("serve", "--help").output
    assert "--max-context, --max-model-len" in help_text


def test_every_serve_option_has_help_text():
    command = main.commands["serve"]
    missing = [p.name for p in command.params if isinstance(p, click.Option) and not p.help]
    assert missing == []
    assert all(
        p.help for p in command.params if isinstance(p, click.Option) and "scheduler" in p.name
    )
