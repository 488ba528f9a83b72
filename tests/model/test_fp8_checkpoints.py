"""Issue 31: a block-FP8 release (float8_e4m3fn weights with ``weight_scale_inv`` block grids,
as the Qwen3.5 / Qwen3-Next / Qwen3.8 ``-FP8`` checkpoints are published) loads dequantised
to the serving dtype: every parameter equals the block-dequantised tensor exactly, and the
logits match transformers run on the same dequantised weights. Any other quantisation is
refused in one line naming the file and the method."""

from __future__ import annotations

import json

import pytest
import torch

from ignition.model.checkpoint_files import WeightsError, locate_tensors
from ignition.model.families.registry import family_for_checkpoint
from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.quant import UnsupportedQuantization
from ignition.model.sampling import SamplingTensors
from ignition.model.step import run_step
from ignition.model.weights import check_layout, load_checkpoint
from tests.model.conftest import new_state
from tests.model.fp8_checkpoints import edit_file, quantize_to_fp8, write_dequantized
from tests.model.hf_checkpoints import Variant, write_qwen3_next, write_qwen35

pytest.importorskip("transformers")

BLOCK = (32, 32)  # tiny model, several blocks per weight and ragged edges (e.g. 4-row in_proj_b)
PROMPT = [11, 400, 7, 93, 1200, 5, 64, 3000, 18, 2, 77, 512]


def _pair(root, write, block=BLOCK, scale_dtype=torch.float32):
    """(FP8 checkpoint folder, its dequantised twin, the names that were quantised)."""
    fp8 = root / "fp8"
    write(fp8)
    quantised = quantize_to_fp8(fp8, block, scale_dtype)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[
        json.loads((fp8 / "config.json").read_text()).get("dtype", "float32")
    ]
    write_dequantized(fp8, root / "dequantized", dtype)
    return fp8, root / "dequantized", quantised


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    return _pair(tmp_path_factory.mktemp("dense"), lambda p: write_qwen35(p, Variant()))


def _assert_same_parameters(fp8_path, dequantized_path):
    ours = dict(load_checkpoint(fp8_path).model.named_parameters())
    twin = dict(load_checkpoint(dequantized_path).model.named_parameters())
    assert ours.keys() == twin.keys()
    for name, param in ours.items():
        assert param.dtype == twin[name].dtype, name
        assert torch.equal(param, twin[name]), name


def test_dense_fp8_checkpoint_loads_exactly_the_block_dequantised_weights(dense):
    fp8, dequantized, quantised = dense
    assert any(".mlp.gate_proj." in n for n in quantised)
    assert any(n.endswith("linear_attn.in_proj_qkv.weight") for n in quantised)
    assert any(n.startswith("mtp.") for n in quantised)
    _assert_same_parameters(fp8, dequantized)


def test_fp8_logits_match_transformers_on_the_dequantised_weights(dense):
    import transformers as tf

    fp8, dequantized, _ = dense
    model = load_checkpoint(fp8).model
    reference = tf.Qwen3_5ForConditionalGeneration.from_pretrained(
        dequantized, dtype=torch.float32
    ).eval()
    with torch.no_grad():
        expected = reference(input_ids=torch.tensor([PROMPT]), use_cache=False).logits[0, -1]
    capacity = PackedCapacity.mixed(1, 1, 64)
    inputs = PackedInputs.build(capacity, [PROMPT], [0], prefill_row=0)
    out = run_step(model, new_state(model.config), inputs, capacity, SamplingTensors.greedy(1))
    torch.testing.assert_close(out.target.logits[len(PROMPT) - 1], expected, atol=1e-4, rtol=0)


def test_fused_fp8_experts_dequantise_with_their_three_dimensional_scale_grid(tmp_path):
    variant = Variant(moe=True, fused_experts=True, sharded=True, seed=2)
    fp8, dequantized, quantised = _pair(tmp_path, lambda p: write_qwen35(p, variant))
    assert any(n.endswith(".experts.gate_up_proj") for n in quantised)
    _assert_same_parameters(fp8, dequantized)


def test_qwen3_next_fp8_checkpoint_loads_exactly_the_dequantised_weights(tmp_path):
    fp8, dequantized, quantised = _pair(tmp_path, lambda p: write_qwen3_next(p, seed=4))
    assert any(n.endswith("in_proj_qkvz.weight") for n in quantised)
    _assert_same_parameters(fp8, dequantized)


def test_bf16_release_with_bf16_block_scales_dequantises_in_float32_then_rounds(tmp_path):
    """The published shape: bf16 serving dtype, [128, 128] blocks, BF16 scales."""
    fp8, dequantized, _ = _pair(
        tmp_path,
        lambda p: write_qwen35(p, Variant(dtype="bfloat16", seed=6)),
        block=(128, 128),
        scale_dtype=torch.bfloat16,
    )
    assert load_checkpoint(fp8).model.embed_tokens.weight.dtype == torch.bfloat16
    _assert_same_parameters(fp8, dequantized)


@pytest.mark.parametrize(
    ("quantization", "named"),
    [
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, r"'modelopt' \(NVFP4\)"),
        ({"quant_method": "compressed-tensors", "format": "float-quantized"}, "compressed-tensors"),
        ({"quant_method": "gptq", "bits": 4}, "'gptq'"),
        ({"quant_method": "awq", "bits": 4}, "'awq'"),
        ({"quant_method": "fp8", "scale_fmt": "ue8m0"}, "scale_fmt' = 'ue8m0'"),
    ],
)
def test_other_quantisations_are_refused_in_one_line_naming_file_and_method(
    dense, tmp_path, quantization, named
):
    _, dequantized, _ = dense
    path = tmp_path / "other"
    path.mkdir()
    config = json.loads((dequantized / "config.json").read_text())
    config["quantization_config"] = quantization
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedQuantization, match=rf"config\.json: .*{named}") as err:
        load_checkpoint(path)
    assert "\n" not in str(err.value)


def test_a_modelopt_side_file_without_quantization_config_is_refused(dense, tmp_path):
    _, dequantized, _ = dense
    path = tmp_path / "nvfp4"
    path.mkdir()
    (path / "config.json").write_text((dequantized / "config.json").read_text())
    side = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4"}}
    (path / "hf_quant_config.json").write_text(json.dumps(side))
    with pytest.raises(UnsupportedQuantization, match=r"hf_quant_config\.json: .*'NVFP4'"):
        load_checkpoint(path)


def test_missing_scale_tensor_names_the_file_and_tensor(tmp_path):
    fp8, _, _ = _pair(tmp_path, lambda p: write_qwen35(p, Variant(mtp=False, seed=7)))
    weight = "model.language_model.layers.0.linear_attn.out_proj.weight"
    edit_file(fp8, weight, lambda t: t.pop(weight + "_scale_inv"))
    with pytest.raises(WeightsError, match=rf"safetensors: FP8 tensor '{weight}' has no scale"):
        load_checkpoint(fp8)


def test_wrongly_shaped_scale_tensor_names_the_file_and_tensor(tmp_path):
    fp8, _, _ = _pair(tmp_path, lambda p: write_qwen35(p, Variant(mtp=False, seed=8)))
    scale = "model.language_model.layers.3.self_attn.o_proj.weight_scale_inv"
    edit_file(fp8, scale, lambda t: t.update({scale: torch.ones(1, 1)}))
    with pytest.raises(WeightsError, match=rf"safetensors: scale tensor '{scale}' .* \[1, 1\]"):
        load_checkpoint(fp8)


def test_fp8_tensor_without_quantization_config_is_named(tmp_path):
    fp8, _, _ = _pair(tmp_path, lambda p: write_qwen35(p, Variant(mtp=False, seed=9)))
    config = json.loads((fp8 / "config.json").read_text())
    del config["quantization_config"]
    (fp8 / "config.json").write_text(json.dumps(config))
    with pytest.raises(WeightsError, match=r"is F8_E4M3 but .*config\.json has no quantization"):
        load_checkpoint(fp8)


def test_a_loader_without_the_fp8_plan_refuses_fp8_tensors(dense):
    """The tensor-parallel loader reads raw slices, so it must not take FP8 bytes as weights."""
    fp8, _, _ = dense
    family = family_for_checkpoint(fp8)
    located = locate_tensors(fp8)
    raw = json.loads((fp8 / "config.json").read_text())
    config = family.parse_config(raw, "config.json", frozenset(located))
    with torch.device("meta"):
        model = family.model_class()(config)
    layout = family.layout(model, frozenset(located))
    with pytest.raises(WeightsError, match="is F8_E4M3; only the one-device loader"):
        check_layout(model, fp8, located, layout)
