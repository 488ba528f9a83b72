"""`ignition build`: a bundle with catalog, manifest, tokenizer and report; reuse; errors."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ignition.cli import main
from ignition.components.catalog import load_catalog
from tests.checkpoints import write_tiny_checkpoint

# No --recipe: the qwen4_exp test checkpoint resolves to qwen38 through its family.
BUILD = ["--mixed-prefill", "--max-prefill-chunk", "128"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return write_tiny_checkpoint(tmp_path_factory.mktemp("ckpt"))


@pytest.fixture(scope="module")
def built(checkpoint, tmp_path_factory):
    out = tmp_path_factory.mktemp("bundle")
    result = CliRunner().invoke(
        main, ["build", *BUILD, "--weights", str(checkpoint), "--out", str(out), "--device", "cpu"]
    )
    assert result.exit_code == 0, result.output
    return out, result.output


def test_build_writes_the_bundle(built):
    out, output = built
    for name in (
        "catalog.json",
        "manifest.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "build_report.md",
    ):
        assert (out / name).exists(), name
    catalog = load_catalog(out / "catalog.json")
    assert catalog.counts()["mixed_speculative"] == 2 * 2 + 2  # buckets 64, 128 at B 2, 4
    assert f"{len(catalog.descriptors)} programs" in output


def test_manifest_records_every_program_with_its_validation_time(built, checkpoint):
    out, _ = built
    manifest = json.loads((out / "manifest.json").read_text())
    catalog = load_catalog(out / "catalog.json")
    assert [p["name"] for p in manifest["programs"]] == sorted(
        (d.name for d in catalog.descriptors),
        key=[p["name"] for p in manifest["programs"]].index,
    )
    assert {p["name"] for p in manifest["programs"]} == {d.name for d in catalog.descriptors}
    assert all(p["validation_ns"] > 0 for p in manifest["programs"])
    assert manifest["checkpoint"]["path"] == str(checkpoint.resolve())
    assert len(manifest["checkpoint"]["sha256"]) == 64
    assert {"python", "torch", "ignition"} <= set(manifest["packages"])
    assert manifest["options"] == {"mixed_prefill": True, "max_prefill_chunk": 128}


def test_index_keys_keep_the_models_dtype_unless_the_build_chooses_fp8(built):
    out, _ = built
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["runtime"]["indexer_kv_dtype"] == "auto"
    assert "indexer_kv_dtype" not in manifest["options"]


def test_programs_are_prepared_largest_first(built):
    out, _ = built
    extents = [
        p["max_packed_extent"] for p in json.loads((out / "manifest.json").read_text())["programs"]
    ]
    assert extents == sorted(extents, reverse=True)


def test_build_report_lists_the_programs(built):
    out, _ = built
    report = (out / "build_report.md").read_text()
    assert "# Build report: qwen38" in report
    for program in json.loads((out / "manifest.json").read_text())["programs"]:
        assert f"`{program['name']}`" in report


def test_rebuilding_unchanged_inputs_reuses_every_program(built, checkpoint):
    out, _ = built
    result = CliRunner().invoke(
        main, ["build", *BUILD, "--weights", str(checkpoint), "--out", str(out), "--device", "cpu"]
    )
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["reused"] == len(manifest["programs"])


def test_generate_from_the_bundle_is_identical_across_decode_modes(built):
    out, _ = built
    texts = {}
    for mode in (
        ["--speculation", "off"],
        ["--speculation", "fixed"],
        ["--speculation", "adaptive", "--no-mixed"],
    ):
        result = CliRunner().invoke(
            main,
            [
                "generate",
                "--artifacts",
                str(out),
                "--prompt",
                "def add(a, b):",
                "--max-tokens",
                "10",
                "--json",
                "--threads",
                "1",
                *mode,
            ],
        )
        assert result.exit_code == 0, result.output
        data = json.loads(result.output)
        assert len(data["token_ids"]) == 10 or data["finish_reason"] == "stop"
        assert data["steps"] and all(s["device_ms"] > 0 for s in data["steps"])
        texts[mode[1]] = data["token_ids"]
    assert texts["off"] == texts["fixed"] == texts["adaptive"]


def test_a_recipe_without_a_model_family_is_a_clear_error(checkpoint, tmp_path):
    from ignition.recipes import get_recipe

    text = get_recipe("llama32").path.read_text().replace("family: llama", "family: mamba")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(text.replace("name: llama32", "name: mamba2"))
    result = CliRunner().invoke(
        main,
        ["build", "--recipe", str(recipe), "--weights", str(checkpoint), "--out", str(tmp_path)],
    )
    assert result.exit_code == 2
    assert "model family 'mamba' has no implementation" in result.output


def _bundle_over_a_copy(built, tmp_path):
    """A copy of the bundle pointing at a copy of its checkpoint (same mtimes)."""
    import shutil

    out, _ = built
    manifest = json.loads((out / "manifest.json").read_text())
    checkpoint = shutil.copytree(manifest["checkpoint"]["path"], tmp_path / "ckpt")
    copy = shutil.copytree(out, tmp_path / "bundle")
    manifest["checkpoint"]["path"] = str(checkpoint)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy, checkpoint, manifest


def test_a_checkpoint_changed_after_the_build_is_refused(built, tmp_path):
    import os

    copy, checkpoint, _ = _bundle_over_a_copy(built, tmp_path)
    weights = checkpoint / "model.safetensors"
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    result = CliRunner().invoke(main, ["generate", "--artifacts", str(copy), "--prompt", "x"])
    assert result.exit_code == 2
    assert "model.safetensors: modified since the build" in result.output
    assert "rebuild the bundle" in result.output


def test_verify_weights_hashes_the_checkpoint_again(built, tmp_path):
    copy, _, manifest = _bundle_over_a_copy(built, tmp_path)
    manifest["checkpoint"]["sha256"] = "0" * 64
    (copy / "manifest.json").write_text(json.dumps(manifest))
    args = ["generate", "--artifacts", str(copy), "--prompt", "x", "--verify-weights"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert "differs from the built 000000000000" in result.output


def test_the_manifest_records_each_checkpoint_file_size_and_mtime(built):
    out, _ = built
    manifest = json.loads((out / "manifest.json").read_text())
    files = {f["name"]: f for f in manifest["checkpoint"]["files"]}
    assert {"config.json", "model.safetensors"} <= set(files)
    assert all(f["size"] > 0 and f["mtime_ns"] > 0 for f in files.values())


def test_state_operations_are_validated_and_reported(built):
    out, _ = built
    manifest = json.loads((out / "manifest.json").read_text())
    names = [p["name"] for p in manifest["state_operations"]]
    assert names == ["snapshot-b1-d0-w1-p1", "restore-b1-d0-w1-p1", "init-b1-d0-w1-p1"]
    assert all(p["validation_ns"] > 0 for p in manifest["state_operations"])
    assert "## State operations" in (out / "build_report.md").read_text()


def test_the_bundle_reads_its_chat_template_file_and_generation_config(built, tmp_path):
    import shutil

    from ignition.runtime.bundle import load_bundle

    out, _ = built
    copy = tmp_path / "bundle"
    shutil.copytree(out, copy)
    (copy / "chat_template.jinja").write_text("{{ bos_token }}{{ messages[0].content }}")
    config = {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "eos_token_id": [1, 3]}
    (copy / "generation_config.json").write_text(json.dumps(config))
    bundle = load_bundle(copy, "cpu")
    assert bundle.chat_templates.templates == {
        "default": "{{ bos_token }}{{ messages[0].content }}"
    }
    defaults = bundle.generation_defaults
    assert (defaults.temperature, defaults.top_p, defaults.top_k) == (0.6, 0.95, 20)
    assert {1, 3} <= set(bundle.eos_token_ids)


def test_a_bad_generation_config_in_the_bundle_names_the_file_and_key(built, tmp_path):
    import shutil

    from ignition.runtime.bundle import BundleError, load_bundle

    out, _ = built
    copy = tmp_path / "bundle"
    shutil.copytree(out, copy)
    (copy / "generation_config.json").write_text(json.dumps({"top_p": 2}))
    with pytest.raises(BundleError, match=r"generation_config\.json: top_p = 2"):
        load_bundle(copy, "cpu")
