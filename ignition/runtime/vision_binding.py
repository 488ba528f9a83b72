"""A request's encoded images, and what each of its prompt chunks binds.

The worker encodes a request's images once, when its first prompt chunk is bound (through
the prepared vision programs), and keeps the features on the device until the request is
released. Each prompt chunk then binds the features whose placeholders fall inside it, at
chunk-relative positions, and the chunk's explicit (t, h, w) rope positions; every row of
the request (prompt, decode, verify, MTP drafts) carries the request's rope offset. A
chunk that cuts through an image's span is a contract violation (Helios keeps spans whole).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ignition.compiler.vision_program import VisionRunner
from ignition.components.catalog import GraphKind
from ignition.model.model import HybridModel
from ignition.model.vision.grid import ImageGrid
from ignition.runtime.image_inputs import RequestImages

# pixels [patches, patch_dim], grids -> features [num features, hidden]
ImageEncoder = Callable[[Tensor, Sequence[ImageGrid]], Tensor]


class ImageBindingError(ValueError):
    """A prompt chunk that does not bind whole images."""


@dataclass(frozen=True)
class ChunkImages:
    features: Tensor  # [F, hidden] on the device
    positions: np.ndarray  # [F] int32 chunk-relative index of each feature
    rope: np.ndarray  # [3, chunk length] int32, -1 past the prompt (replayed output)


class RequestVision:
    """One request's images, encoded."""

    def __init__(self, images: RequestImages, features: Tensor) -> None:
        if features.shape[0] != images.num_features:
            raise ImageBindingError(
                f"the encoder returned {features.shape[0]} features for "
                f"{images.num_features} image tokens"
            )
        self.images = images
        self.features = features

    @classmethod
    def encode(
        cls, images: RequestImages, encoder: ImageEncoder, device: torch.device, dtype
    ) -> RequestVision:
        pixels = torch.from_numpy(np.concatenate(images.pixels)).to(device=device, dtype=dtype)
        with torch.no_grad():
            features = encoder(pixels, images.grids)
        return cls(images, features)

    @property
    def rope_delta(self) -> int:
        return self.images.rope_delta

    def chunk(self, start: int, stop: int) -> ChunkImages:
        """What the prompt chunk [start, stop) binds."""
        rows: list[int] = []
        positions: list[int] = []
        index = 0
        for span in self.images.spans:
            if span.start < stop < span.stop or span.start < start < span.stop:
                raise ImageBindingError(
                    f"prompt chunk [{start}, {stop}) splits the image span "
                    f"[{span.start}, {span.stop})"
                )
            if start <= span.start and span.stop <= stop:
                rows.extend(range(index, index + span.length))
                positions.extend(range(span.start - start, span.stop - start))
            index += span.length
        prompt_len = self.images.rope.shape[1]
        rope = np.full((3, stop - start), -1, dtype=np.int32)
        inside = max(0, min(stop, prompt_len) - start)
        rope[:, :inside] = self.images.rope[:, start : start + inside]
        features = self.features[rows] if rows else self.features[:0]
        return ChunkImages(features, np.asarray(positions, dtype=np.int32), rope)


def image_encoder(model: HybridModel, programs: Mapping) -> ImageEncoder | None:
    """The prepared vision programs (``programs``: name -> (Program, PreparedProgram)) as an
    encoder, the eager tower when there are none, or None for a model without one."""
    if model.visual is None:
        return None
    vision = [p for p in programs.values() if p[0].descriptor.kind is GraphKind.VISION]
    if vision:
        return VisionRunner(vision)
    tower = model.visual
    dtype = tower.pos_embed.weight.dtype
    return lambda pixels, grids: tower(pixels.to(dtype), grids)
