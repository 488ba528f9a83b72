"""Issue 11: published Qwen3.5 layouts load through the model-family registry, and bad
input fails with one line naming the file and the key or tensor."""

from __future__ import annotations

import json

import pytest
import torch

from ignition.model.config import ConfigError
from ignition.model.families import family_for_checkpoint
from ignition.model.weights import WeightsError, load_checkpoint
from tests.model.hf_checkpoints import Variant, rewrite_tensors, write_qwen35
from tests.model.test_qwen35_parity import PROMPT, prefill_logits, reference_logits

pytest.importorskip("transformers")

from tests.model.conftest import new_state


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    path = tmp_path_factory.mktemp("dense")
    write_qwen35(path, Variant(seed=3))
    return path


@pytest.fixture
def editable(tmp_path):
    """A fresh checkpoint per test, for tests that damage it."""
    write_qwen35(tmp_path, Variant(seed=4, mtp=False))
    return tmp_path


def test_model_type_picks_the_family(dense, tmp_path):
    assert family_for_checkpoint(dense).name == "qwen3_5"
    write_qwen35(tmp_path, Variant(moe=True, multimodal=False, mtp=False))
    assert family_for_checkpoint(tmp_path).name == "qwen3_5_moe"


def test_checkpoint_with_mtp_tensors_gets_a_draft_head(dense):
    model = load_checkpoint(dense).model
    assert model.mtp is not None and model.config.mtp_num_layers == 1
    assert model.config.linear_num_key_heads == 2 and model.config.linear_num_heads == 4
    assert model.config.rotary_dim == 8  # head_dim 16 * partial_rotary_factor 0.5


def test_checkpoint_without_mtp_tensors_has_no_draft_head(editable):
    assert load_checkpoint(editable).model.mtp is None


def test_tied_checkpoint_shares_the_embedding_with_the_head(tmp_path):
    write_qwen35(tmp_path, Variant(tie_word_embeddings=True, mtp=False))
    model = load_checkpoint(tmp_path).model
    assert model.lm_head.weight is model.embed_tokens.weight


def test_multimodal_checkpoint_loads_its_vision_tower_without_notes(dense):
    loaded = load_checkpoint(dense)
    assert loaded.notes == [] and loaded.model.visual is not None


def test_sharded_fused_expert_layout_is_what_the_parity_test_reads(tmp_path):
    write_qwen35(tmp_path, Variant(moe=True, fused_experts=True, sharded=True))
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())["weight_map"]
    assert len(set(index.values())) > 2
    assert "model.language_model.layers.0.mlp.experts.gate_up_proj" in index
    assert not any(".experts.0." in name for name in index)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_checkpoints_load_in_their_dtype(tmp_path, dtype):
    reference = write_qwen35(tmp_path, Variant(dtype=dtype, seed=5))
    model = load_checkpoint(tmp_path).model
    assert {p.dtype for p in model.parameters()} == {getattr(torch, dtype)}
    ours = prefill_logits(model, new_state(model.config, device="cpu"), 0, PROMPT)[-1]
    expected = reference_logits(reference, PROMPT)[-1]
    assert ours.argmax() == expected.argmax()
    torch.testing.assert_close(ours.float(), expected, atol=0.1, rtol=0.05)


def test_a_half_precision_checkpoint_may_keep_some_tensors_in_fp32(tmp_path):
    write_qwen35(tmp_path, Variant(dtype="bfloat16", mtp=False, seed=6))
    name = "model.language_model.layers.0.linear_attn.A_log"

    def widen(tensors):
        tensors[name] = tensors[name].float()

    rewrite_tensors(tmp_path, widen)
    model = load_checkpoint(tmp_path).model
    assert model.layers[0].linear_attn.A_log.dtype == torch.bfloat16


def test_an_index_naming_the_wrong_shard_is_named(tmp_path):
    write_qwen35(tmp_path, Variant(sharded=True, mtp=False, seed=7))
    index_path = tmp_path / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    name = "model.language_model.norm.weight"
    shards = sorted(set(index["weight_map"].values()))
    index["weight_map"][name] = next(s for s in shards if s != index["weight_map"][name])
    index_path.write_text(json.dumps(index))
    with pytest.raises(WeightsError, match=rf"the index places '{name}' here; absent"):
        load_checkpoint(tmp_path)


def test_unknown_model_type_is_named(dense, tmp_path):
    raw = json.loads((dense / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**raw, "model_type": "qwen9"}))
    with pytest.raises(ConfigError, match=r"config.json: key 'model_type' = 'qwen9': unknown"):
        family_for_checkpoint(tmp_path)


def test_missing_config_key_names_the_file_and_the_nested_key(editable):
    raw = json.loads((editable / "config.json").read_text())
    del raw["text_config"]["linear_num_value_heads"]
    (editable / "config.json").write_text(json.dumps(raw))
    with pytest.raises(
        ConfigError, match=r"config.json: missing key 'text_config.linear_num_value"
    ):
        load_checkpoint(editable)


def test_tensor_of_the_wrong_shape_is_named(editable):
    name = "model.language_model.layers.1.linear_attn.in_proj_qkv.weight"
    rewrite_tensors(editable, lambda t: t.update({name: torch.zeros(3, 64)}))
    with pytest.raises(WeightsError, match=rf"tensor '{name}' has shape \[3, 64\], expected"):
        load_checkpoint(editable)


def test_missing_tensor_is_named(editable):
    name = "model.language_model.layers.3.self_attn.q_norm.weight"
    rewrite_tensors(editable, lambda t: t.pop(name))
    with pytest.raises(WeightsError, match=rf"missing tensor '{name}'"):
        load_checkpoint(editable)


def test_unexpected_tensor_is_named(editable):
    rewrite_tensors(editable, lambda t: t.update({"model.language_model.extra": torch.zeros(1)}))
    with pytest.raises(WeightsError, match=r"unexpected tensor 'model.language_model.extra'"):
        load_checkpoint(editable)
