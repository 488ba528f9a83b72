"""Issue 31: `ignition build --weights DIR` on a transformers-saved Qwen3.8-Flash-Next
(qwen4_exp) folder picks its recipe from config.json, and `ignition generate` reproduces
transformers' greedy tokens past the QSA index budget, with and without mixed programs.
(The MTP head is not read yet, so the bundle serves with speculation off and says so.)"""

from __future__ import annotations

import json

import pytest

from tests.compiler.test_build_families import build, generate, reference_greedy
from tests.model.hf_checkpoints import write_qwen4_exp

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def qwen4_exp(tmp_path_factory):
    """(bundle, build output, transformers' greedy tokens)."""
    weights = tmp_path_factory.mktemp("qwen4-weights")
    reference = write_qwen4_exp(weights, seed=3)
    bundle = tmp_path_factory.mktemp("qwen4-bundle")
    output = build(weights, bundle, "--mixed-prefill")
    return bundle, output, reference_greedy(reference, weights)


def test_build_without_recipe_uses_the_qwen4_exp_family_with_speculation_off(qwen4_exp):
    bundle, output, _ = qwen4_exp
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert (manifest["family"], manifest["recipe"]) == ("qwen4_exp", "qwen4-exp")
    assert "speculation is off" in output


@pytest.mark.parametrize("mixed", [True, False], ids=["mixed", "no-mixed"])
def test_generate_reproduces_transformers_greedy_tokens(qwen4_exp, mixed):
    bundle, _, expected = qwen4_exp
    assert generate(bundle, *([] if mixed else ["--no-mixed"])) == expected
