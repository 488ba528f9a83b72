"""Issue 13 deliverable 1: the tower loads from ``model.visual.*`` of a transformers save and
computes what transformers' own ``model.visual`` computes."""

from __future__ import annotations

import pytest
import torch

from ignition.model.vision.grid import ImageGrid
from ignition.model.weights import load_checkpoint
from tests.model.hf_checkpoints import Variant, write_qwen35

pytest.importorskip("transformers")


def test_tower_loaded_from_model_visual_matches_the_saved_model(tmp_path):
    reference = write_qwen35(tmp_path, Variant(seed=7, mtp=False))
    loaded = load_checkpoint(tmp_path).model
    config = loaded.config.vision
    assert (config.hidden_size, config.num_hidden_layers, config.patch_size) == (32, 1, 4)
    assert loaded.visual.out_size == loaded.config.hidden_size
    grids = [(1, 4, 4), (1, 2, 6)]
    pixels = torch.randn(28, 3 * 2 * 4 * 4, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = reference.model.visual(pixels, grid_thw=torch.tensor(grids)).pooler_output
        got = loaded.visual(pixels, [ImageGrid(*g) for g in grids])
    assert (got - expected).abs().max().item() <= 1e-4


def test_text_only_save_has_no_tower(tmp_path):
    write_qwen35(tmp_path, Variant(multimodal=False, mtp=False))
    loaded = load_checkpoint(tmp_path)
    assert loaded.model.visual is None and loaded.model.config.vision is None
