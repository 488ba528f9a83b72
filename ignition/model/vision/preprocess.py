"""Decoded image -> patches as the Qwen2-VL image processor does (Pillow + numpy only)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from ignition.model.vision.grid import ImageGrid

PREPROCESSOR_FILE = "preprocessor_config.json"
MAX_ASPECT_RATIO = 200


class ImageSizeError(ValueError):
    """An image the processor cannot resize (zero-sized or too elongated)."""


@dataclass(frozen=True)
class ImageProcessing:
    """The processor's settings (Qwen3.5's published defaults)."""

    patch_size: int = 16
    temporal_patch_size: int = 2
    merge_size: int = 2
    min_pixels: int = 65536
    max_pixels: int = 16777216
    image_mean: tuple[float, float, float] = (0.5, 0.5, 0.5)
    image_std: tuple[float, float, float] = (0.5, 0.5, 0.5)

    @property
    def factor(self) -> int:
        return self.patch_size * self.merge_size

    def bounded(self, max_patches: int) -> ImageProcessing:
        """These settings with max_pixels lowered to fit ``max_patches`` patches."""
        cap = max_patches * self.patch_size**2
        return replace(self, max_pixels=min(self.max_pixels, cap))

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any], source: str = PREPROCESSOR_FILE):
        """Settings from a preprocessor_config.json mapping (size or min/max_pixels keys)."""
        size = raw.get("size") or {}
        values: dict[str, Any] = {}
        for key in ("patch_size", "temporal_patch_size", "merge_size"):
            if key in raw:
                values[key] = raw[key]
        values["min_pixels"] = raw.get("min_pixels", size.get("shortest_edge", cls.min_pixels))
        values["max_pixels"] = raw.get("max_pixels", size.get("longest_edge", cls.max_pixels))
        for key in ("image_mean", "image_std"):
            if key in raw:
                values[key] = tuple(float(v) for v in raw[key])
        settings = cls(**values)
        for key in ("patch_size", "temporal_patch_size", "merge_size", "min_pixels", "max_pixels"):
            got = getattr(settings, key)
            if not isinstance(got, int) or isinstance(got, bool) or got <= 0:
                raise ValueError(f"{source}: key {key!r} = {got!r}: must be a positive int")
        if len(settings.image_mean) != 3 or len(settings.image_std) != 3:
            raise ValueError(f"{source}: image_mean and image_std need three channels")
        return settings

    @classmethod
    def for_checkpoint(
        cls, folder: str | Path, patch_size: int, temporal: int, merge: int
    ) -> ImageProcessing:
        """The checkpoint's own file, else the defaults with the tower's patch geometry."""
        path = Path(folder) / PREPROCESSOR_FILE
        if path.is_file():
            return cls.from_mapping(json.loads(path.read_text()), str(path))
        return cls(patch_size=patch_size, temporal_patch_size=temporal, merge_size=merge)


@dataclass(frozen=True)
class PreparedImage:
    """Patches of one image, ready for the vision tower."""

    pixels: np.ndarray  # [patches, 3 * temporal * patch * patch] float32
    grid: ImageGrid

    def num_features(self, merge: int) -> int:
        return self.grid.num_features(merge)


def fit_to_grid(height: int, width: int, settings: ImageProcessing) -> tuple[int, int]:
    """Resized (height, width): multiples of ``factor``, area within the pixel bounds."""
    if height <= 0 or width <= 0:
        raise ImageSizeError(f"image is {width}x{height} pixels: both sides must be positive")
    if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
        raise ImageSizeError(
            f"image is {width}x{height} pixels: aspect ratio above {MAX_ASPECT_RATIO}"
        )
    factor = settings.factor
    h = round(height / factor) * factor
    w = round(width / factor) * factor
    if h * w > settings.max_pixels:
        beta = math.sqrt(height * width / settings.max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < settings.min_pixels:
        beta = math.sqrt(settings.min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return h, w


def prepare_image(image: Image.Image, settings: ImageProcessing) -> PreparedImage:
    """One decoded image as normalised patches in merge-block order."""
    rgb = image.convert("RGB") if image.mode != "RGB" else image
    h, w = fit_to_grid(rgb.height, rgb.width, settings)
    resized = rgb.resize((w, h), resample=Image.Resampling.BICUBIC)
    array = np.asarray(resized, dtype=np.float32).transpose(2, 0, 1)  # [3, h, w]
    array = (array.astype(np.float64) * (1 / 255)).astype(np.float32)
    mean = np.asarray(settings.image_mean, dtype=np.float32)[:, None, None]
    std = np.asarray(settings.image_std, dtype=np.float32)[:, None, None]
    array = (array - mean) / std
    return PreparedImage(
        _patchify(array, settings), ImageGrid(1, h // settings.patch_size, w // settings.patch_size)
    )


def prepare_images(images: Sequence[Image.Image], settings: ImageProcessing) -> list[PreparedImage]:
    return [prepare_image(image, settings) for image in images]


def _patchify(array: np.ndarray, settings: ImageProcessing) -> np.ndarray:
    p, m, t = settings.patch_size, settings.merge_size, settings.temporal_patch_size
    channels, height, width = array.shape
    gh, gw = height // p, width // p
    blocks = array.reshape(channels, gh // m, m, p, gw // m, m, p)
    blocks = blocks.transpose(1, 4, 2, 5, 0, 3, 6)  # [bh, bw, mh, mw, c, p, p]
    frames = np.broadcast_to(blocks[:, :, :, :, :, None], (*blocks.shape[:5], t, p, p))
    return np.ascontiguousarray(frames.reshape(gh * gw, channels * t * p * p), dtype=np.float32)
