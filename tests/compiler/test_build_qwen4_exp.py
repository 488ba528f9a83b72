"""Issue 31: `ignition build --weights DIR` on a transformers-saved Qwen3.8-Flash-Next
(qwen4_exp) folder picks its recipe from config.json, and `ignition generate` reproduces
transformers' greedy tokens past the QSA index budget with speculation off, fixed and
adaptive (the MTP head read as vLLM reads it), with and without mixed programs; without
``mtp.*`` tensors the bundle serves with speculation off and says so."""

from __future__ import annotations

import json

import pytest

from tests.compiler.test_build_families import build, generate, reference_greedy
from tests.model.hf_checkpoints import write_qwen4_exp

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def qwen4_weights(tmp_path_factory):
    """(checkpoint folder, the transformers model)."""
    weights = tmp_path_factory.mktemp("qwen4-weights")
    return weights, write_qwen4_exp(weights, seed=3, mtp=True)


@pytest.fixture(scope="module")
def qwen4_exp(tmp_path_factory, qwen4_weights):
    """(bundle, build output, transformers' greedy tokens)."""
    weights, reference = qwen4_weights
    bundle = tmp_path_factory.mktemp("qwen4-bundle")
    output = build(weights, bundle, "--mixed-prefill")
    return bundle, output, reference_greedy(reference, weights)


def test_build_without_recipe_uses_the_qwen4_exp_family_with_speculation(qwen4_exp):
    bundle, _, _ = qwen4_exp
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert (manifest["family"], manifest["recipe"]) == ("qwen4_exp", "qwen38")
    assert manifest["runtime"]["speculation"] == "adaptive"


@pytest.mark.parametrize("speculation", ["off", "fixed", "adaptive"])
@pytest.mark.parametrize("mixed", [True, False], ids=["mixed", "no-mixed"])
def test_generate_reproduces_transformers_greedy_tokens(qwen4_exp, speculation, mixed):
    bundle, _, expected = qwen4_exp
    extra = ["--speculation", speculation, *([] if mixed else ["--no-mixed"])]
    assert generate(bundle, *extra) == expected


@pytest.mark.parametrize("residency", ["host", "disk"])
def test_a_table_off_the_device_reproduces_transformers_greedy_tokens(
    qwen4_weights, qwen4_exp, tmp_path, residency, monkeypatch
):
    """The n-gram table mapped from the checkpoint's own shards in place, its rows staged by
    the host or resolved by the program's mailbox; neither the build (its validation runs
    get their rows through the same store) nor serving's loader reads it."""
    import ignition.model.weights as weights

    _, _, expected = qwen4_exp
    bundle = tmp_path / "bundle"
    read, original = [], weights.read_tensor
    monkeypatch.setattr(weights, "read_tensor", lambda f, n: read.append(n) or original(f, n))
    build(qwen4_weights[0], bundle, "--mixed-prefill", "--ple-residency", residency)
    assert read and [n for n in read if "ngram_embedding" in n] == []  # the build's loader
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["ple"]["residency"] == residency
    # the build report describes the checkpoint's own shards: two layers' tables in pieces
    assert manifest["ple"]["table"] == "n-gram" and manifest["ple"]["num_shards"] >= 2
    read.clear()
    for speculation in ("off", "adaptive"):
        assert generate(bundle, "--speculation", speculation) == expected
    assert read and [n for n in read if "ngram_embedding" in n] == []


def test_checkpoint_without_mtp_builds_with_speculation_off_and_says_so(tmp_path):
    write_qwen4_exp(tmp_path / "w", seed=4)
    assert "speculation is off" in build(tmp_path / "w", tmp_path / "b")
