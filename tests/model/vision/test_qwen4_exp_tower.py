"""Issue 31: Qwen3.8-Flash-Next's vision tower (Qwen4ExpVisionModel) is the Qwen3-VL tower the
shared encoder implements: random weights, fp32 max abs error <= 1e-4."""

from __future__ import annotations

import pytest
import torch

from ignition.model.vision.grid import ImageGrid
from tests.model.vision.test_encoder_parity import HF_VISION, ours_from

tf = pytest.importorskip("transformers")


def test_qwen4_exp_vision_tower_matches_transformers_within_1e_4_fp32():
    from transformers.models.qwen4_exp.modeling_qwen4_exp import Qwen4ExpVisionModel

    torch.manual_seed(0)
    hf = Qwen4ExpVisionModel(tf.Qwen4ExpVisionConfig(**HF_VISION)).eval()
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in hf.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            scale = 0.2 if "norm" in name or "bias" in name else 1 / param.shape[-1] ** 0.5
            base = 1.0 if "norm" in name and name.endswith("weight") else 0.0
            param.copy_(base + noise * (1.0 if "pos_embed" in name else scale))
    ours = ours_from(hf)
    grids = [(1, 6, 4), (2, 4, 4)]
    thw = torch.tensor(grids)
    patches = int(thw.prod(-1).sum())
    pixels = torch.randn(patches, 3 * 2 * 4 * 4, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = hf(pixels, grid_thw=thw).pooler_output
        got = ours(pixels, [ImageGrid(*g) for g in grids])
    assert (got - expected).abs().max().item() <= 1e-4
