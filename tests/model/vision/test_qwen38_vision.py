"""Issue 13 deliverable 1: the qwen38 family's optional vision block is the same tower, loaded
from ``model.visual.*`` of a seed-format checkpoint."""

from __future__ import annotations

import json

import pytest
import torch

from ignition.model.config import ConfigError, Qwen38Config, VisionConfig
from ignition.model.vision.encoder import VisionEncoder
from ignition.model.vision.grid import ImageGrid
from ignition.model.weights import load_checkpoint, write_random_checkpoint

BLOCK = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, patch_size=4)


def test_seed_format_vision_block_loads_into_the_shared_tower(tmp_path):
    config = Qwen38Config.tiny(vision=VisionConfig(**BLOCK))
    write_random_checkpoint(tmp_path, config, seed=2)
    saved = json.loads((tmp_path / "config.json").read_text())["vision"]
    assert saved["spatial_merge_size"] == 2 and saved["out_hidden_size"] == 0
    model = load_checkpoint(tmp_path).model
    assert isinstance(model.visual, VisionEncoder)
    assert model.visual.out_size == config.hidden_size
    features = model.visual(torch.randn(16, 96), [ImageGrid(1, 4, 4)])
    assert features.shape == (4, config.hidden_size) and torch.isfinite(features).all()


def test_vision_block_errors_name_the_key():
    with pytest.raises(ConfigError, match=r"'vision\.hidden_act'"):
        Qwen38Config.from_dict(
            {**Qwen38Config.tiny().to_dict(), "vision": {**BLOCK, "hidden_act": "relu6"}}
        )
    with pytest.raises(ConfigError, match=r"'vision\.patch_size'"):
        Qwen38Config.from_dict(
            {**Qwen38Config.tiny().to_dict(), "vision": {**BLOCK, "patch_size": 0}}
        )
