"""Issue 38, 3.1: a checkpoint whose ``max_position_embeddings`` is below the recipe's largest
program (4096 positions; qwen38's mixed programs at the 4096 bucket pack 4097..4099 tokens) is
built with the prompt buckets that fit, saying so in one line, by ``ignition serve
CHECKPOINT`` and ``ignition build``; naming a larger ``--max-prefill-chunk`` is one line
naming it."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from ignition.cli import main
from ignition.compiler.context_fit import fit_checkpoint_build, fit_to_context
from ignition.components.capacity import CapacityError, plan_catalog
from ignition.recipes import LoadOptions, get_recipe
from tests.checkpoints import write_tiny_checkpoint

QWEN38 = get_recipe("qwen38")
MIXED = LoadOptions(mixed_prefill=True)


@pytest.fixture(scope="module")
def checkpoint_4096(tmp_path_factory):
    return write_tiny_checkpoint(tmp_path_factory.mktemp("ck4096"), max_position_embeddings=4096)


def test_the_recipes_largest_program_does_not_fit_4096_positions():
    assert plan_catalog(QWEN38, MIXED).max_packed_extent() > 4096


def test_the_build_takes_the_largest_prompt_bucket_that_fits_and_says_so():
    fit = fit_to_context(QWEN38, MIXED, 4096, "ck/config.json")
    assert fit.options == LoadOptions(mixed_prefill=True, max_prefill_chunk=3072)
    assert plan_catalog(QWEN38, fit.options).max_packed_extent() <= 4096
    assert fit.note is not None and "\n" not in fit.note
    assert "ck/config.json: max_position_embeddings = 4096" in fit.note
    assert "capped at 3072" in fit.note


def test_a_serving_build_may_be_capped_at_a_bucket_only_serving_builds_prepare():
    """qwen38's 1280 bucket exists from 32 slots (concurrency_defaults more_prompt_buckets)."""
    serving = LoadOptions(mixed_prefill=True, concurrency=32)
    assert fit_to_context(QWEN38, serving, 1400, "x").options.max_prefill_chunk == 1280
    small = LoadOptions(mixed_prefill=True, concurrency=8)
    assert fit_to_context(QWEN38, small, 1400, "x").options.max_prefill_chunk == 1024


def test_a_model_that_holds_every_program_builds_the_recipe_unchanged():
    assert fit_to_context(QWEN38, MIXED, 8192, "x").options is MIXED
    assert fit_to_context(QWEN38, MIXED, 8192, "x").note is None


def test_a_named_prefill_chunk_beyond_the_model_is_refused_naming_the_option():
    options = LoadOptions(mixed_prefill=True, max_prefill_chunk=4096)
    with pytest.raises(CapacityError, match=r"--max-prefill-chunk = 4096: .* choose at most 3072"):
        fit_to_context(QWEN38, options, 4096, "ck/config.json")


def test_a_model_shorter_than_every_bucket_is_one_line():
    with pytest.raises(CapacityError, match="max_position_embeddings = 32: even the smallest"):
        fit_to_context(QWEN38, MIXED, 32, "ck/config.json")


def test_every_fitted_program_is_one_the_model_can_run(checkpoint_4096):
    """The check that failed with a 48-line traceback (compiler.programs.check_buildable)."""
    from ignition.compiler.programs import check_buildable
    from ignition.model.weights import load_model

    model = load_model(checkpoint_4096)
    fit = fit_checkpoint_build(QWEN38, MIXED, checkpoint_4096)
    assert fit.options.max_prefill_chunk == 3072
    for descriptor in plan_catalog(QWEN38, fit.options).descriptors:
        check_buildable(descriptor, model)


@pytest.fixture
def fake_build(monkeypatch):
    import ignition.cli.progress
    import ignition.serving.forever

    builds = []

    def build(recipe_name, options, *, weights, out_dir, **_):
        builds.append(options)
        out_dir.mkdir(parents=True)
        for name in ("manifest.json", "catalog.json"):
            (out_dir / name).write_text("{}")
        return type("Result", (), {"notes": [], "out_dir": out_dir})()

    monkeypatch.setattr(ignition.cli.progress, "build_with_progress", build)
    monkeypatch.setattr(ignition.serving.forever, "serve_forever", lambda *a, **k: None)
    return builds


def test_serve_checkpoint_builds_the_fitted_catalog_with_one_note(
    fake_build, checkpoint_4096, tmp_path
):
    result = CliRunner().invoke(
        main, ["serve", str(checkpoint_4096), "--cache-dir", str(tmp_path), "--port", "0"]
    )
    # --port 0 is refused before anything: the start reaches the fit only with a real port
    assert result.exit_code == 2 and fake_build == []
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    args = ["serve", str(checkpoint_4096), "--cache-dir", str(tmp_path), "--port", str(port)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert [b.max_prefill_chunk for b in fake_build] == [3072]
    notes = [line for line in result.output.splitlines() if "max_position_embeddings" in line]
    assert len(notes) == 1 and notes[0].startswith("note: ") and "3072" in notes[0]


def test_build_refuses_a_named_chunk_the_model_cannot_hold_in_one_line(fake_build, checkpoint_4096):
    args = ["build", "--weights", str(checkpoint_4096), "--mixed-prefill"]
    args += ["--max-prefill-chunk", "4096"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "--max-prefill-chunk = 4096" in lines[0]
    assert fake_build == []
