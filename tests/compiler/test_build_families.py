"""Issue 11: `ignition build --weights DIR` on transformers-saved Qwen3.5 (dense and MoE) and
Llama folders picks the recipe from config.json, and `ignition generate` reproduces
transformers' greedy tokens with speculation off, fixed and adaptive, with and without mixed
programs."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner
from tokenizers import Tokenizer

from ignition.cli import main
from tests.model.hf_checkpoints import Variant, write_llama, write_qwen35

pytest.importorskip("transformers")

SMALL = ["--max-prefill-chunk", "128", "--concurrency", "2", "--device", "cpu"]
PROMPT = "def parse_args(argv):\n    "
NUM_TOKENS = 20


def build(weights, out, *extra: str):
    result = CliRunner().invoke(
        main, ["build", "--weights", str(weights), "--out", str(out), *SMALL, *extra]
    )
    assert result.exit_code == 0, result.output
    return result.output


def generate(bundle, *extra: str) -> list[int]:
    args = ["generate", "--artifacts", str(bundle), "--prompt", PROMPT, "--json", "--device", "cpu"]
    result = CliRunner().invoke(main, [*args, "--max-tokens", str(NUM_TOKENS), *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["token_ids"]


def reference_greedy(reference, weights) -> list[int]:
    ids = Tokenizer.from_file(str(weights / "tokenizer.json")).encode(PROMPT).ids
    with torch.no_grad():
        out = reference.generate(
            input_ids=torch.tensor([ids]), max_new_tokens=NUM_TOKENS, do_sample=False
        )
    return out[0, len(ids) :].tolist()


@pytest.fixture(scope="module", params=["dense", "moe"])
def qwen35(request, tmp_path_factory):
    """(bundle, transformers' greedy tokens) for a Qwen3.5 checkpoint with an MTP head."""
    weights = tmp_path_factory.mktemp(f"{request.param}-weights")
    reference = write_qwen35(weights, Variant(moe=request.param == "moe", seed=7))
    bundle = tmp_path_factory.mktemp(f"{request.param}-bundle")
    build(weights, bundle, "--mixed-prefill")
    return bundle, reference_greedy(reference, weights)


def test_build_without_recipe_uses_the_checkpoints_family(qwen35):
    bundle, _ = qwen35
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert (manifest["family"], manifest["recipe"]) in (
        ("qwen3_5", "qwen35"),
        ("qwen3_5_moe", "qwen35-moe"),
    )
    assert manifest["runtime"]["speculation"] == "adaptive"


@pytest.mark.parametrize("speculation", ["off", "fixed", "adaptive"])
@pytest.mark.parametrize("mixed", [True, False], ids=["mixed", "no-mixed"])
def test_generate_reproduces_transformers_greedy_tokens(qwen35, speculation, mixed):
    bundle, expected = qwen35
    extra = ["--speculation", speculation, *([] if mixed else ["--no-mixed"])]
    assert generate(bundle, *extra) == expected


def test_checkpoint_without_mtp_builds_with_speculation_off_and_says_so(tmp_path):
    reference = write_qwen35(tmp_path / "w", Variant(mtp=False, multimodal=False, seed=8))
    output = build(tmp_path / "w", tmp_path / "b")
    notes = [line for line in output.splitlines() if "speculation is off" in line]
    assert len(notes) == 1 and "no MTP head" in notes[0]
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["runtime"]["speculation"] == "off"
    assert manifest["counts"]["speculative"] == 0
    assert generate(tmp_path / "b") == reference_greedy(reference, tmp_path / "w")


def test_a_recipe_of_another_family_is_one_line_naming_both(tmp_path):
    write_qwen35(tmp_path / "w", Variant(mtp=False, multimodal=False))
    result = CliRunner().invoke(
        main, ["build", "--recipe", "qwen38", "--weights", str(tmp_path / "w"), *SMALL]
    )
    assert result.exit_code == 2
    message = result.output.strip().splitlines()
    assert len(message) == 1
    assert "recipe qwen38 is for family 'qwen4_exp'" in message[0]
    assert "is family 'qwen3_5' (recipe qwen35)" in message[0]


def test_llama32_builds_and_generates_transformers_greedy_tokens(tmp_path):
    reference = write_llama(tmp_path / "w")
    output = build(tmp_path / "w", tmp_path / "b", "--recipe", "llama3.2-1b")
    assert "speculation is off" not in output
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["recipe"] == "llama32"
    assert generate(tmp_path / "b") == reference_greedy(reference, tmp_path / "w")
