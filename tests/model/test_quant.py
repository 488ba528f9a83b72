"""Issue 31: block-FP8 dequantisation (ragged blocks, fused experts, per-tensor scales), the
n-gram table's rows times its one shared scale, and reading ``quantization_config``."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from ignition.model.checkpoint_files import locate_tensors
from ignition.model.config import ConfigError
from ignition.model.quant import (
    Fp8Scheme,
    dequantize,
    dequantize_rows,
    plan_fp8,
    read_quantization,
    scale_names,
)

TABLE = "model.language_model.layers.1.ple.ple_embedding.ngram_embedding"


def _fp8(*shape: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=generator) * 50).to(torch.float8_e4m3fn)


def _block_by_block(weight, scale, block):
    """Each block, cut short at the edges, times its own scale (plain loops)."""
    out = weight.float().clone()
    rows, cols = weight.shape[-2:]
    for i in range(scale.shape[-2]):
        for j in range(scale.shape[-1]):
            r, c = (
                slice(i * block[0], min(rows, (i + 1) * block[0])),
                slice(j * block[1], min(cols, (j + 1) * block[1])),
            )
            out[..., r, c] *= scale[..., i, j, None, None].float()
    return out


def test_ragged_blocks_are_each_scaled_by_their_own_value():
    weight = _fp8(70, 50)  # blocks of 32 x 16: a 6-row last block row, a 2-column last column
    scale = torch.arange(1, 13, dtype=torch.float32).reshape(3, 4) / 7
    got = dequantize(weight, scale, (32, 16), torch.float32)
    assert torch.equal(got, _block_by_block(weight, scale, (32, 16)))


def test_fused_expert_weights_scale_each_expert_with_its_own_grid():
    weight = _fp8(3, 40, 20, seed=1)
    scale = torch.rand(3, 3, 2, generator=torch.Generator().manual_seed(2)) + 0.5
    got = dequantize(weight, scale, (16, 16), torch.float32)
    assert torch.equal(got, _block_by_block(weight, scale, (16, 16)))


def test_a_scale_that_is_not_the_block_grid_is_refused():
    with pytest.raises(ValueError, match=r"scale \[2, 2\] is not the \(32, 16\) block grid"):
        dequantize(_fp8(70, 50), torch.ones(2, 2), (32, 16), torch.float32)


def test_bf16_result_is_the_float32_product_rounded_once():
    weight, scale = _fp8(128, 256, seed=3), torch.tensor([[0.0123, 3.7]], dtype=torch.bfloat16)
    got = dequantize(weight, scale, (128, 128), torch.bfloat16)
    assert torch.equal(got, _block_by_block(weight, scale, (128, 128)).to(torch.bfloat16))


def test_ple_rows_dequantise_as_rows_times_the_tables_one_scale():
    table = _fp8(40, 16, seed=4)
    scale = torch.tensor([0.0371], dtype=torch.bfloat16)
    rows = torch.tensor([3, 39, 3, 0])
    got = dequantize_rows(table[rows], scale, torch.bfloat16)
    assert torch.equal(got, (table[rows].float() * scale.float()).to(torch.bfloat16))
    assert torch.equal(got, dequantize_rows(table, scale, torch.bfloat16)[rows])


def test_dequantize_rows_refuses_a_block_scale():
    with pytest.raises(ValueError, match=r"one value, got shape \[2, 1\]"):
        dequantize_rows(_fp8(4, 8), torch.ones(2, 1), torch.float32)


def test_a_table_shard_reads_the_scale_its_table_shares():
    assert scale_names(f"{TABLE}.shard_3.weight")[-1] == f"{TABLE}.weight_scale"


def test_a_fused_expert_tensor_names_its_scale_after_itself():
    name = "model.layers.0.mlp.experts.gate_up_proj"
    assert scale_names(name)[0] == f"{name}_scale_inv"


def test_split_ple_table_shards_are_paired_with_the_shared_scale(tmp_path):
    """Qwen3.8-Flash-Next-FP8: F8_E4M3 shard_N rows, one BF16 [1] weight_scale."""
    scale = torch.tensor([0.25], dtype=torch.bfloat16)
    shards = {f"{TABLE}.shard_{i}.weight": _fp8(5 - i, 8, seed=i) for i in range(2)}
    save_file({**shards, f"{TABLE}.weight_scale": scale}, str(tmp_path / "model.safetensors"))
    located = locate_tensors(tmp_path)
    plan = plan_fp8(tmp_path / "config.json", located, Fp8Scheme(block=(128, 128)))
    assert plan.scales == {name: f"{TABLE}.weight_scale" for name in shards}
    assert plan.consumed == {f"{TABLE}.weight_scale"}
    for name, rows in shards.items():
        got = plan.dequantize(name, rows, located, torch.float32)
        assert torch.equal(got, rows.float() * 0.25)


def test_static_activation_scales_are_read_with_their_weight_and_not_left_over(tmp_path):
    """Dequantised serving computes activations in the serving dtype; the scale is unused."""
    name = "model.layers.0.mlp.down_proj"
    tensors = {
        f"{name}.weight": _fp8(4, 8),
        f"{name}.weight_scale_inv": torch.ones(1, 1),
        f"{name}.input_scale": torch.ones(()),
    }
    save_file(tensors, str(tmp_path / "model.safetensors"))
    scheme = Fp8Scheme(block=(128, 128), activation_scheme="static")
    plan = plan_fp8(tmp_path / "config.json", locate_tensors(tmp_path), scheme)
    assert plan.consumed == {f"{name}.weight_scale_inv", f"{name}.input_scale"}


def _scheme(tmp_path, quantization):
    (tmp_path / "config.json").write_text(json.dumps({"quantization_config": quantization}))
    return read_quantization({"quantization_config": quantization}, tmp_path)


def test_the_published_fp8_config_reads_block_size_and_skip_list(tmp_path):
    quantization = {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "quant_method": "fp8",
        "weight_block_size": [128, 128],
        "modules_to_not_convert": ["lm_head", "model.layers.0.mlp.gate"],
    }
    assert _scheme(tmp_path, quantization) == Fp8Scheme(
        (128, 128), "dynamic", ("lm_head", "model.layers.0.mlp.gate")
    )


def test_an_unquantised_config_has_no_scheme(tmp_path):
    assert read_quantization({"model_type": "qwen3_5"}, tmp_path) is None


def test_a_malformed_block_size_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"'quantization_config.weight_block_size' = \[128\]"):
        _scheme(tmp_path, {"quant_method": "fp8", "weight_block_size": [128]})
