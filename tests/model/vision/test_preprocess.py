"""Issue 13 deliverable 2: preprocessing as the family's processor defines it (resize to the
patch grid within min/max pixels, normalisation, grid T/H/W), checked against transformers'
image processor."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from ignition.model.vision.preprocess import (
    ImageProcessing,
    ImageSizeError,
    fit_to_grid,
    prepare_image,
)

tf = pytest.importorskip("transformers")

SETTINGS = ImageProcessing(patch_size=4, min_pixels=8 * 8 * 4, max_pixels=64 * 64)


def hf_processor(settings: ImageProcessing):
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    return Qwen2VLImageProcessorPil(
        patch_size=settings.patch_size,
        temporal_patch_size=settings.temporal_patch_size,
        merge_size=settings.merge_size,
        min_pixels=settings.min_pixels,
        max_pixels=settings.max_pixels,
        image_mean=list(settings.image_mean),
        image_std=list(settings.image_std),
    )


def random_image(width: int, height: int, mode: str = "RGB", seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed)
    array = rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)
    return Image.fromarray(array, "RGB").convert(mode)


@pytest.mark.parametrize(
    ("width", "height", "mode"),
    [(40, 24, "RGB"), (9, 7, "RGB"), (300, 120, "RGB"), (33, 50, "L"), (20, 20, "RGBA")],
)
def test_patches_and_grid_match_the_qwen2_vl_image_processor(width, height, mode):
    image = random_image(width, height, mode, seed=width)
    expected = hf_processor(SETTINGS)(images=[image], return_tensors="np")
    got = prepare_image(image, SETTINGS)
    assert [got.grid.t, got.grid.h, got.grid.w] == expected["image_grid_thw"][0].tolist()
    assert got.pixels.shape == expected["pixel_values"].shape
    assert np.abs(got.pixels - expected["pixel_values"]).max() <= 1e-5


def test_resized_area_stays_within_min_and_max_pixels():
    for height, width in [(1, 3), (5000, 300), (64, 64), (2, 300)]:
        h, w = fit_to_grid(height, width, SETTINGS)
        assert h % SETTINGS.factor == 0 and w % SETTINGS.factor == 0
        assert SETTINGS.min_pixels <= h * w <= SETTINGS.max_pixels


def test_zero_sized_or_extreme_aspect_images_are_refused():
    with pytest.raises(ImageSizeError, match="0x5"):
        fit_to_grid(5, 0, SETTINGS)
    with pytest.raises(ImageSizeError, match="aspect ratio"):
        fit_to_grid(1, 201, SETTINGS)


def test_preprocessor_config_json_overrides_the_defaults(tmp_path):
    (tmp_path / "preprocessor_config.json").write_text(
        '{"size": {"shortest_edge": 1024, "longest_edge": 4096}, "patch_size": 8,'
        ' "image_mean": [0.1, 0.2, 0.3], "image_std": [1, 1, 1]}'
    )
    settings = ImageProcessing.for_checkpoint(tmp_path, patch_size=4, temporal=2, merge=2)
    assert (settings.patch_size, settings.min_pixels, settings.max_pixels) == (8, 1024, 4096)
    assert settings.image_mean == (0.1, 0.2, 0.3)
    default = ImageProcessing.for_checkpoint(tmp_path / "none", patch_size=4, temporal=2, merge=2)
    assert default.patch_size == 4 and default.image_mean == (0.5, 0.5, 0.5)
