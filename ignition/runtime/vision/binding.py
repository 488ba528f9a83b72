"""A request's encoded images, and what each of its prompt chunks binds."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ignition.compiler.vision_program import VisionRunner
from ignition.components.program_kinds import GraphKind
from ignition.model.model import HybridModel
from ignition.model.vision.grid import ImageGrid
from ignition.runtime.vision.inputs import RequestImages

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
    """One request's active window of images, encoded into its prepared feature storage."""

    def __init__(
        self, images: RequestImages, window: Sequence[int], storage: Tensor, num_features: int
    ) -> None:
        self.images = images
        self.window = tuple(window)  # image indices, prompt order
        self.storage = storage  # [capacity, hidden]: features at compact offsets from zero
        self.num_features = num_features

    @classmethod
    def encode(
        cls,
        images: RequestImages,
        window: Sequence[int] | None,
        encoder: ImageEncoder,
        storage: Tensor,
    ) -> RequestVision:
        """Encode the window's images (all when ``window`` is None) into ``storage``."""
        chosen = tuple(range(len(images.grids))) if window is None else tuple(window)
        expected = sum(images.spans[i].length for i in chosen)
        if expected > storage.shape[0]:
            raise ImageBindingError(
                f"a vision window of {expected} features exceeds the prepared feature "
                f"storage of {storage.shape[0]}"
            )
        if chosen:
            pixels = np.concatenate([images.pixels[i] for i in chosen])
            device = storage.device
            with torch.no_grad():
                features = encoder(
                    torch.from_numpy(pixels).to(device), [images.grids[i] for i in chosen]
                )
            if features.shape[0] != expected:
                raise ImageBindingError(
                    f"the encoder returned {features.shape[0]} features for {expected} image tokens"
                )
            storage[:expected].copy_(features.to(storage.dtype))
        return cls(images, chosen, storage, expected)

    @property
    def rope_delta(self) -> int:
        return self.images.rope_delta

    def chunk(self, start: int, stop: int) -> ChunkImages:
        """What the prompt chunk [start, stop) binds (of the active window's images)."""
        rows: list[int] = []
        positions: list[int] = []
        for i, span in enumerate(self.images.spans):
            if span.start < stop < span.stop or span.start < start < span.stop:
                raise ImageBindingError(
                    f"prompt chunk [{start}, {stop}) splits the image span "
                    f"[{span.start}, {span.stop})"
                )
            if start <= span.start and span.stop <= stop:
                if i not in self.window:
                    raise ImageBindingError(
                        f"prompt chunk [{start}, {stop}) holds image {i}, which is not in "
                        f"the active vision window {list(self.window)}"
                    )
                offset = sum(self.images.spans[j].length for j in self.window if j < i)
                rows.extend(range(offset, offset + span.length))
                positions.extend(range(span.start - start, span.stop - start))
        prompt_len = self.images.rope.shape[1]
        rope = np.full((3, stop - start), -1, dtype=np.int32)
        inside = max(0, min(stop, prompt_len) - start)
        rope[:, :inside] = self.images.rope[:, start : start + inside]
        features = self.storage[rows] if rows else self.storage[:0]
        return ChunkImages(features, np.asarray(positions, dtype=np.int32), rope)


def image_encoder(model: HybridModel, programs: Mapping) -> ImageEncoder | None:
    """The prepared vision programs as an encoder, else the eager tower, else None."""
    if model.visual is None:
        return None
    vision = [p for p in programs.values() if p[0].descriptor.kind is GraphKind.VISION]
    if vision:
        return VisionRunner(vision)
    tower = model.visual
    dtype = tower.pos_embed.weight.dtype
    return lambda pixels, grids: tower(pixels.to(dtype), grids)
