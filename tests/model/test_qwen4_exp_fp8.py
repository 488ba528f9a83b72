"""Issue 31: a Qwen3.8-Flash-Next ``-FP8`` layout (block-FP8 projections, each PLE table's
``shard_N`` rows in F8_E4M3 sharing one ``ngram_embedding.weight_scale``) loads through the
qwen4_exp family exactly as its dequantised twin, whose logits match transformers'."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors
from ignition.model.step import run_step
from ignition.model.weights import load_checkpoint
from tests.model.conftest import new_state
from tests.model.fp8_checkpoints import FP8_MAX, quantize_to_fp8, write_dequantized
from tests.model.hf_checkpoints import rewrite_tensors, write_qwen4_exp

pytest.importorskip("transformers")

PROMPT = [(31 * i + 7) % 4000 + 9 for i in range(30)]
TABLE = ".ple.ple_embedding.ngram_embedding"


def _quantize_tables(tensors: dict[str, torch.Tensor]) -> None:
    """Each PLE table's shards in F8_E4M3 with one BF16 [1] scale for the whole table."""
    stems = {name.split(".shard_")[0] for name in tensors if f"{TABLE}.shard_" in name}
    for stem in stems:
        shards = [n for n in tensors if n.startswith(f"{stem}.shard_")]
        peak = max(float(tensors[n].abs().max()) for n in shards)
        scale = torch.tensor([peak / FP8_MAX], dtype=torch.bfloat16)
        for name in shards:
            tensors[name] = (tensors[name] / scale.float()).to(torch.float8_e4m3fn)
        tensors[f"{stem}.weight_scale"] = scale


def _expand_tables(tensors: dict[str, torch.Tensor]) -> None:
    for scale_name in [n for n in tensors if n.endswith(f"{TABLE}.weight_scale")]:
        scale = tensors.pop(scale_name).float()
        stem = scale_name[: -len(".weight_scale")]
        for name in [n for n in tensors if n.startswith(f"{stem}.shard_")]:
            tensors[name] = (tensors[name].float() * scale).contiguous()


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("qwen4-fp8")
    fp8, twin = root / "fp8", root / "dequantized"
    write_qwen4_exp(fp8, seed=5, mtp=True)
    quantised = quantize_to_fp8(fp8, (16, 16))
    rewrite_tensors(fp8, _quantize_tables)
    staged = root / "staged"
    shutil.copytree(fp8, staged)
    rewrite_tensors(staged, _expand_tables)
    write_dequantized(staged, twin, torch.float32)
    return fp8, twin, quantised


def test_fp8_qwen4_exp_loads_exactly_its_dequantised_twin(pair):
    fp8, twin, quantised = pair
    assert "quantization_config" in json.loads((fp8 / "config.json").read_text())
    for part in ("indexer.index_qk_proj.", "ple.key_proj.", "experts.gate_up_proj", "mtp."):
        assert any(part in name for name in quantised), part
    ours = dict(load_checkpoint(fp8).model.named_parameters())
    expected = dict(load_checkpoint(twin).model.named_parameters())
    assert ours.keys() == expected.keys()
    for name, param in ours.items():
        assert torch.equal(param, expected[name]), name


def test_fp8_qwen4_exp_logits_match_transformers_on_the_twin(pair):
    import transformers as tf

    fp8, twin, _ = pair
    model = load_checkpoint(fp8).model
    reference = tf.Qwen4ExpForCausalLM.from_pretrained(twin, dtype=torch.float32).eval()
    with torch.no_grad():
        expected = reference(input_ids=torch.tensor([PROMPT]), use_cache=False).logits[0]
    capacity = PackedCapacity.mixed(1, 1, 64)
    inputs = PackedInputs.build(capacity, [PROMPT], [0], prefill_row=0)
    out = run_step(model, new_state(model.config), inputs, capacity, SamplingTensors.greedy(1))
    got = out.target.logits[: len(PROMPT)].detach()
    assert float((got - expected.float()).abs().max()) < 1e-4
