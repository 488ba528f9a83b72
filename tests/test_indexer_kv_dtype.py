"""``--indexer-kv-dtype``: how QSA's compressed index keys are stored (vLLM's
``indexer_kv_dtype``). A build records its choice in the manifest and validates its programs
with it; serve takes the bundle's unless it names its own; off ("auto", the model's dtype)
unless chosen. Models without QSA layers accept it and change nothing."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from click.testing import CliRunner

from ignition.cli import main
from ignition.model.config import ModelConfig
from ignition.model.weights import write_random_checkpoint
from ignition.recipes import parse_load_options
from ignition.runtime.bundle import BundleError
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from ignition.serving.engine import ServeOptions, open_engine
from tests.checkpoints import VOCAB_SIZE, write_tiny_checkpoint

SMALL = ["--max-prefill-chunk", "64", "--concurrency", "1", "--device", "cpu"]
NUM_TOKENS = 32
# Past the tiny checkpoint's 64-token index budget, so the indexer chooses blocks.
PROMPTS = [
    [(37 * i + 11) % (VOCAB_SIZE - 9) + 9 for i in range(160)],
    torch.randint(9, VOCAB_SIZE, (100,), generator=torch.Generator().manual_seed(1)).tolist(),
    torch.randint(9, VOCAB_SIZE, (180,), generator=torch.Generator().manual_seed(2)).tolist(),
]
# Greedy tokens before the first difference, as a share of all (measured 0.93: 25, 32, 32).
MIN_SAME_SHARE = 0.8


def build(checkpoint, out, *extra: str) -> str:
    args = ["build", "--weights", str(checkpoint), "--out", str(out), *SMALL, *extra]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return write_tiny_checkpoint(tmp_path_factory.mktemp("ckpt"))


@pytest.fixture(scope="module")
def fp8_bundle(checkpoint, tmp_path_factory):
    out = tmp_path_factory.mktemp("fp8-bundle")
    build(checkpoint, out, "--indexer-kv-dtype", "fp8")
    return out


def state_of(bundle, **serve):
    """The serving engine's state, started the way ``ignition serve`` starts it."""
    _, engine = open_engine(ServeOptions(artifacts=str(bundle), device="cpu", **serve))
    return engine, engine.worker.state


def test_a_build_records_its_index_key_storage_and_serving_allocates_it(fp8_bundle):
    manifest = json.loads((fp8_bundle / "manifest.json").read_text())
    assert manifest["runtime"]["indexer_kv_dtype"] == "fp8"
    _, state = state_of(fp8_bundle)
    assert state.index_keys.dtype == torch.float8_e4m3fn
    assert state.mtp_index_keys.dtype == torch.float8_e4m3fn
    assert state.k_cache.dtype == torch.float32  # only the index keys change


def test_serve_chooses_over_the_bundle(fp8_bundle):
    _, state = state_of(fp8_bundle, indexer_kv_dtype="auto")
    assert state.index_keys.dtype == state.k_cache.dtype == torch.float32
    _, state = state_of(fp8_bundle, indexer_kv_dtype="bf16")
    assert state.index_keys.dtype == torch.bfloat16


def test_a_bad_flag_value_is_one_line_naming_the_flag(fp8_bundle):
    args = ["generate", "--artifacts", str(fp8_bundle), "--prompt", "x"]
    result = CliRunner().invoke(main, [*args, "--indexer-kv-dtype", "fp4"])
    assert result.exit_code == 2
    assert "'--indexer-kv-dtype'" in result.output and "'fp4'" in result.output


def test_a_bad_value_in_a_recipe_option_or_a_manifest_names_its_key(fp8_bundle, tmp_path):
    with pytest.raises(ValueError, match=r"'options.indexer_kv_dtype' = 'fp4': expected one of"):
        parse_load_options({"indexer_kv_dtype": "fp4"}, "options")
    bundle = tmp_path / "bundle"
    shutil.copytree(fp8_bundle, bundle)
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["runtime"]["indexer_kv_dtype"] = "int4"
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match=r"runtime.indexer_kv_dtype = 'int4': expected one of"):
        state_of(bundle)


def greedy(engine, prompt: list[int], request_id: str = "r") -> list[int]:
    tokens: list[int] = []
    sampling = SamplingParams(max_tokens=NUM_TOKENS, temperature=0.0, ignore_eos=True)
    request = GenerationRequest(request_id, tuple(prompt), sampling)
    engine.submit(request, lambda chunk: tokens.extend(chunk.token_ids))
    engine.run_until_idle()
    return tokens


def first_difference(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y), len(a))


def test_greedy_output_with_fp8_index_keys_is_measured_against_bf16_keys(fp8_bundle):
    """Measured, not assumed equal: per prompt (all past the 64-token index budget), the
    greedy tokens before the first difference. The random tiny model's logits are close to
    ties, so one flipped block choice can change a token; the selections themselves are
    compared in tests/model/test_qsa_fp8_index_keys.py."""
    engines = {d: state_of(fp8_bundle, indexer_kv_dtype=d)[0] for d in ("bf16", "fp8")}
    same = []
    for i, prompt in enumerate(PROMPTS):
        bf16, fp8 = (greedy(engines[d], prompt, f"r{i}") for d in ("bf16", "fp8"))
        assert len(fp8) == NUM_TOKENS
        same.append(first_difference(fp8, bf16))
    share = sum(same) / (NUM_TOKENS * len(PROMPTS))
    print(f"fp8 vs bf16 index keys: {same} of {NUM_TOKENS} greedy tokens before the first "
          f"difference ({share:.2f} of all)")  # fmt: skip
    assert share >= MIN_SAME_SHARE


def test_a_model_without_qsa_accepts_the_flag_and_says_it_changes_nothing(tmp_path, checkpoint):
    weights = tmp_path / "weights"
    write_random_checkpoint(weights, ModelConfig.tiny(vocab_size=VOCAB_SIZE))
    shutil.copy(checkpoint / "tokenizer.json", weights / "tokenizer.json")
    shutil.copy(checkpoint / "tokenizer_config.json", weights / "tokenizer_config.json")
    out = tmp_path / "bundle"
    output = build(weights, out, "--speculation", "off", "--indexer-kv-dtype", "fp8")
    assert "has no QSA indexer, so indexer_kv_dtype 'fp8' changes nothing" in output
    engine, state = state_of(out)
    assert state.index_keys.numel() == 0
    assert len(greedy(engine, PROMPTS[0][:20])) == NUM_TOKENS
