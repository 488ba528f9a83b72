"""Issue 13 deliverable 1: the Qwen3.5 vision tower matches transformers' vision module
(random weights, fp32 max abs error <= 1e-4), and loads from ``model.visual.*``."""

from __future__ import annotations

import pytest
import torch

from ignition.model.config_vision import VisionConfig
from ignition.model.vision.encoder import VisionEncoder
from ignition.model.vision.grid import ImageGrid

tf = pytest.importorskip("transformers")

HF_VISION = dict(
    depth=2,
    hidden_size=32,
    intermediate_size=64,
    num_heads=2,
    out_hidden_size=48,
    patch_size=4,
    num_position_embeddings=64,
)


def hf_vision_model(seed: int = 0):
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5VisionModel

    torch.manual_seed(seed)
    model = Qwen3_5VisionModel(tf.Qwen3_5VisionConfig(**HF_VISION)).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            scale = 0.2 if "norm" in name or "bias" in name else 1 / param.shape[-1] ** 0.5
            base = 1.0 if "norm" in name and name.endswith("weight") else 0.0
            param.copy_(base + noise * (1.0 if "pos_embed" in name else scale))
    return model


def ours_from(hf) -> VisionEncoder:
    config = VisionConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        patch_size=4,
        intermediate_size=64,
        out_hidden_size=48,
        num_position_embeddings=64,
    )
    ours = VisionEncoder(config).eval()
    missing, unexpected = ours.load_state_dict(hf.state_dict(), strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    return ours


@pytest.mark.parametrize("grids", [[(1, 4, 6)], [(1, 6, 4), (1, 2, 2), (2, 4, 4)]])
def test_vision_tower_matches_transformers_within_1e_4_fp32(grids):
    hf = hf_vision_model()
    ours = ours_from(hf)
    thw = torch.tensor(grids)
    patches = int(thw.prod(-1).sum())
    pixels = torch.randn(patches, 3 * 2 * 4 * 4, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = hf(pixels, grid_thw=thw).pooler_output
        got = ours(pixels, [ImageGrid(*g) for g in grids])
    assert got.shape == expected.shape == (patches // 4, 48)
    assert (got - expected).abs().max().item() <= 1e-4


def test_vision_tower_rejects_pixels_that_do_not_fill_the_grids():
    ours = ours_from(hf_vision_model())
    with pytest.raises(ValueError, match="grids need 16"):
        ours(torch.zeros(12, 96), [ImageGrid(1, 4, 4)])
