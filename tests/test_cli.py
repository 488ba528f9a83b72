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
    (["serve", "--prompt-lookup-min", "0"], "--prompt-lookup-min = 0: must be at least 1"),
    (
        ["serve", "--prompt-lookup-max", "1", "--prompt-lookup-min", "2"],
        "--prompt-lookup-max = 1: must be at least 2",
    ),
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


# -- issue 24: `ignition serve PATH` and the flags vLLM users type --------------------------


@pytest.fixture
def served(monkeypatch):
    """Run `serve` up to the point where it would load: the ServeOptions it would serve."""
    import ignition.serving.forever

    seen = []

    def serve_forever(options, host, port, direct, **_):
        seen.append(options)
        return None

    monkeypatch.setattr(ignition.serving.forever, "serve_forever", serve_forever)
    # nothing listens: whether the default port is free here is not these tests' business
    # (tests/cli/test_serve_start_checks.py checks the port)
    import ignition.cli.serve_common

    monkeypatch.setattr(ignition.cli.serve_common, "check_port_free", lambda host, port: None)
    return seen


@pytest.fixture
def fake_bundle(tmp_path):
    path = tmp_path / "bundle"
    path.mkdir()
    (path / "manifest.json").write_text("{}")
    return path


def test_serve_takes_a_bundle_as_path_as_vllm_serve_takes_a_model(served, fake_bundle):
    assert run("serve", str(fake_bundle)).exit_code == 0
    assert run("serve", "--artifacts", str(fake_bundle)).exit_code == 0
    assert [o.artifacts for o in served] == [str(fake_bundle)] * 2


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda p: p.mkdir(), "neither a bundle (no manifest.json) nor a checkpoint folder"),
        (lambda p: p.write_text("x"), "a file, not a folder"),
        (lambda p: None, "no such folder"),
        (
            lambda p: (p.mkdir(), (p / "config.json").write_text("{}")),
            "config.json but no *.safetensors weights",
        ),
    ],
)
def test_a_path_that_is_neither_is_a_one_line_error_naming_it(served, tmp_path, make, expected):
    path = tmp_path / "thing"
    make(path)
    _one_line_error(run("serve", str(path)), str(path), expected)
    assert served == []


def test_serve_needs_exactly_one_path(served, fake_bundle):
    _one_line_error(run("serve"), "serve needs PATH")
    both = run("serve", str(fake_bundle), "--artifacts", str(fake_bundle))
    _one_line_error(both, "give the bundle or checkpoint once")


def test_max_num_seqs_sets_the_request_slots(served, fake_bundle):
    assert run("serve", str(fake_bundle), "--max-num-seqs", "2").exit_code == 0
    assert served[0].max_num_seqs == 2
    _one_line_error(run("serve", str(fake_bundle), "--max-num-seqs", "0"), "--max-num-seqs = 0")


def test_chat_template_reads_a_file_or_takes_the_template_inline(served, fake_bundle, tmp_path):
    template = tmp_path / "chat.jinja"
    template.write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    assert run("serve", str(fake_bundle), "--chat-template", str(template)).exit_code == 0
    inline = "{{ messages[0].content }}"
    assert run("serve", str(fake_bundle), "--chat-template", inline).exit_code == 0
    assert served[0].chat_template == (str(template), template.read_text())
    assert served[1].chat_template == ("--chat-template", inline)


def test_a_bad_chat_template_is_a_one_line_error(served, fake_bundle):
    missing = run("serve", str(fake_bundle), "--chat-template", "nowhere.jinja")
    _one_line_error(missing, "--chat-template = 'nowhere.jinja'", "no such file")
    broken = run("serve", str(fake_bundle), "--chat-template", "{% for m in %}")
    _one_line_error(broken, "--chat-template", "syntax error")
    assert served == []


def test_prefix_caching_flags_map_to_the_snapshot_rows(served, fake_bundle):
    assert run("serve", str(fake_bundle), "--no-enable-prefix-caching").exit_code == 0
    assert run("serve", str(fake_bundle), "--enable-prefix-caching").exit_code == 0
    assert run("serve", str(fake_bundle)).exit_code == 0
    assert [o.snapshot_rows for o in served] == [0, None, None]
    conflict = run("serve", str(fake_bundle), "--no-enable-prefix-caching", "--snapshot-rows", "4")
    _one_line_error(conflict, "--no-enable-prefix-caching with --snapshot-rows = 4")


def test_metrics_names_vllm_asks_for_the_vllm_aliases(served, fake_bundle):
    assert run("serve", str(fake_bundle), "--metrics-names", "vllm").exit_code == 0
    assert run("serve", str(fake_bundle)).exit_code == 0
    assert [o.metrics_names for o in served] == ["vllm", "flare"]


def test_served_model_name_is_accepted_as_in_vllm(served, fake_bundle):
    assert run("serve", str(fake_bundle), "--served-model-name", "qwen").exit_code == 0
    assert served[0].served_model_names == ("qwen",)


def test_a_checkpoint_is_built_once_into_the_cache_then_served(served, monkeypatch, tmp_path):
    import ignition.cli.progress
    from tests.checkpoints import write_tiny_checkpoint

    checkpoint = write_tiny_checkpoint(tmp_path / "checkpoint")
    builds = []

    def fake_build(recipe_name, options, *, weights, out_dir, **_):
        builds.append(options)
        out_dir.mkdir(parents=True)
        for name in ("manifest.json", "catalog.json"):
            (out_dir / name).write_text("{}")
        return type("Result", (), {"notes": []})()

    monkeypatch.setattr(ignition.cli.progress, "build_with_progress", fake_build)
    cache = tmp_path / "cache"
    args = ("serve", str(checkpoint), "--cache-dir", str(cache), "--max-num-seqs", "2")
    first, second = run(*args), run(*args)
    assert first.exit_code == 0 and second.exit_code == 0, first.output + second.output
    assert len(builds) == 1 and builds[0].concurrency == 2  # --max-num-seqs is the build's
    assert "building" in first.output and "reusing the cached build" in second.output
    assert served[0].artifacts == served[1].artifacts
    assert served[0].artifacts.startswith(str(cache / "bundles"))
    assert served[0].max_num_seqs is None  # built in: the bundle's own slots
    assert run("serve", str(checkpoint), "--cache-dir", str(cache)).exit_code == 0
    assert len(builds) == 2  # other options, another entry


def test_a_checkpoint_served_with_two_ranks_is_built_for_two_ranks(served, monkeypatch, tmp_path):
    """``serve CHECKPOINT -tp 2`` builds each rank's programs (spawned ranks) into its own
    cache entry, then serves that bundle with two ranks; a one-rank start builds another."""
    import ignition.cli.progress
    import ignition.distributed.launch
    from tests.checkpoints import write_tiny_checkpoint

    checkpoint = write_tiny_checkpoint(tmp_path / "checkpoint")
    ranks = []

    def fake_build(recipe_name, options, *, weights, out_dir, tensor_parallel_size=1, **_):
        ranks.append(tensor_parallel_size)
        out_dir.mkdir(parents=True)
        for name in ("manifest.json", "catalog.json"):
            (out_dir / name).write_text("{}")
        return type("Result", (), {"notes": []})()

    def one_process_group(size, options, rank_zero, debug=False):
        groups.append(size)
        return rank_zero(options, None)

    groups = []
    monkeypatch.setattr(ignition.cli.progress, "build_with_progress", fake_build)
    monkeypatch.setattr(ignition.distributed.launch, "run_tensor_parallel", one_process_group)
    args = ("serve", str(checkpoint), "--cache-dir", str(tmp_path / "cache"))
    for extra in (("-tp", "2"), ("-tp", "2"), ()):
        result = run(*args, *extra)
        assert result.exit_code == 0, result.output
    assert ranks == [2, 1]  # the second two-rank start reuses the two-rank build
    assert served[0].artifacts == served[1].artifacts != served[2].artifacts
    assert groups == [2, 2]  # both two-rank starts serve with two ranks


def test_a_checkpoint_under_torchrun_with_two_ranks_is_a_one_line_error(monkeypatch, tmp_path):
    from tests.checkpoints import write_tiny_checkpoint

    checkpoint = write_tiny_checkpoint(tmp_path / "checkpoint")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "0")
    result = run("serve", str(checkpoint), "-tp", "2", "--cache-dir", str(tmp_path / "cache"))
    assert result.exit_code == 2
    assert "under torchrun" in result.output and "ignition build --weights" in result.output
