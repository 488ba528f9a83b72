"""Safetensors loading with Hugging Face names, checked tensor by tensor."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from ignition.model.config import ConfigError, ModelConfig
from ignition.model.weights import (
    WEIGHTS_FILE,
    WeightsError,
    load_model,
    random_model,
    write_random_checkpoint,
)
from tests.model.conftest import new_state
from tests.model.helpers import decode_rows


@pytest.fixture
def checkpoint(tmp_path, config):
    return write_random_checkpoint(tmp_path / "tiny", config, seed=5)


def test_checkpoint_uses_hugging_face_names(checkpoint):
    names = set(load_file(checkpoint / WEIGHTS_FILE))
    assert "model.layers.3.self_attn.q_proj.weight" in names
    assert "model.layers.0.linear_attn.A_log" in names
    assert "model.layers.1.mlp.experts.2.gate_proj.weight" in names
    assert "mtp.fc.weight" in names
    assert "lm_head.weight" in names


def test_loaded_model_equals_the_written_one(checkpoint, config):
    loaded = load_model(checkpoint)
    written = random_model(config, seed=5)
    for (name, a), (_, b) in zip(
        loaded.named_parameters(), written.named_parameters(), strict=True
    ):
        assert torch.equal(a, b), name


def test_loaded_model_decodes_like_the_written_one(checkpoint, config):
    loaded, written = load_model(checkpoint), random_model(config, seed=5)
    tokens = [[5, 6, 7, 8]]
    logits = []
    for model in (loaded, written):
        state = new_state(config)
        logits.append(decode_rows(model, state, tokens, [0], width=4).target.logits)
    torch.testing.assert_close(logits[0], logits[1])


def _rewrite(checkpoint, edit):
    tensors = load_file(checkpoint / WEIGHTS_FILE)
    edit(tensors)
    save_file(tensors, str(checkpoint / WEIGHTS_FILE))


def test_missing_tensor_is_named(checkpoint):
    _rewrite(checkpoint, lambda t: t.pop("model.layers.2.linear_attn.dt_bias"))
    with pytest.raises(WeightsError, match=r"missing tensor 'model.layers.2.linear_attn.dt_bias'"):
        load_model(checkpoint)


def test_wrong_shape_is_named(checkpoint):
    def edit(tensors):
        tensors["model.layers.3.self_attn.k_proj.weight"] = torch.zeros(3, 64)

    _rewrite(checkpoint, edit)
    with pytest.raises(WeightsError, match=r"'model.layers.3.self_attn.k_proj.weight' has shape"):
        load_model(checkpoint)


def test_a_non_float_dtype_is_named(checkpoint):
    def edit(tensors):
        tensors["mtp.fc.weight"] = tensors["mtp.fc.weight"].to(torch.int32)

    _rewrite(checkpoint, edit)
    with pytest.raises(WeightsError, match=r"'mtp.fc.weight' has dtype I32, expected"):
        load_model(checkpoint)


def test_a_config_without_model_type_is_refused_naming_the_file(checkpoint):
    raw = json.loads((checkpoint / "config.json").read_text())
    del raw["model_type"]
    (checkpoint / "config.json").write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match=r"tiny/config.json: missing key 'model_type'"):
        load_model(checkpoint)


def test_unexpected_tensor_is_named(checkpoint):
    _rewrite(checkpoint, lambda t: t.update({"model.extra.weight": torch.zeros(1)}))
    with pytest.raises(WeightsError, match=r"unexpected tensor 'model\.extra\.weight'"):
        load_model(checkpoint)


def test_config_errors_name_file_key_and_value(checkpoint):
    raw = json.loads((checkpoint / "config.json").read_text())
    raw["num_key_value_heads"] = 3
    (checkpoint / "config.json").write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match=r"config.json: key 'num_key_value_heads' = 3"):
        load_model(checkpoint)


def test_config_missing_key_is_named(tmp_path, config):
    raw = config.to_dict()
    del raw["linear_value_head_dim"]
    (tmp_path / "config.json").write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match="missing key 'linear_value_head_dim'"):
        ModelConfig.from_json(tmp_path)


def test_config_round_trips_through_json(tmp_path, config):
    (tmp_path / "config.json").write_text(json.dumps(config.to_dict()))
    assert ModelConfig.from_json(tmp_path) == config


def test_tied_checkpoint_has_no_separate_lm_head(tmp_path):
    config = ModelConfig.tiny(tie_word_embeddings=True)
    path = write_random_checkpoint(tmp_path / "tied", config, seed=1)
    assert "lm_head.weight" not in load_file(path / WEIGHTS_FILE)
    model = load_model(path)
    assert model.lm_head.weight is model.embed_tokens.weight
