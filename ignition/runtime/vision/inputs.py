"""The images of one request, as plain data the engine carries from the server to the worker."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ignition.model.vision.grid import ImageGrid
from ignition.model.vision.preprocess import PreparedImage
from ignition.model.vision.prompt import (
    ImageSpan,
    expand_placeholders,
    image_spans,
    multimodal_positions,
)


@dataclass(frozen=True, eq=False)
class RequestImages:
    """A request's images after placeholder expansion (``eq=False``: arrays inside)."""

    pixels: tuple[np.ndarray, ...]  # per image [patches, patch_dim] float32
    grids: tuple[ImageGrid, ...]
    spans: tuple[ImageSpan, ...]  # where each image's features sit in the expanded prompt
    rope: np.ndarray  # [3, prompt length] int32 (temporal, height, width) positions
    rope_delta: int  # a token at sequence position i >= prompt length has rope i + delta

    @property
    def num_features(self) -> int:
        return sum(span.length for span in self.spans)

    @property
    def span_bounds(self) -> tuple[tuple[int, int], ...]:
        """The spans as Helios' atomic ``[start, end)`` pairs."""
        return tuple((span.start, span.stop) for span in self.spans)


def expand_request(
    token_ids: Sequence[int],
    prepared: Sequence[PreparedImage],
    image_token_id: int,
    merge: int,
) -> tuple[list[int], RequestImages]:
    """(expanded prompt, its images); PlaceholderError when placeholders and images differ."""
    grids = [p.grid for p in prepared]
    expanded = expand_placeholders(token_ids, grids, image_token_id, merge)
    positions = multimodal_positions(expanded, grids, image_token_id, merge)
    rope = np.asarray([positions.temporal, positions.height, positions.width], dtype=np.int32)
    images = RequestImages(
        pixels=tuple(p.pixels for p in prepared),
        grids=tuple(grids),
        spans=tuple(image_spans(expanded, image_token_id)),
        rope=rope,
        rope_delta=positions.delta,
    )
    return expanded, images


def expand_offsets(
    offsets: Sequence[int], token_ids: Sequence[int], images: RequestImages, image_token_id: int
) -> tuple[int, ...]:
    """Prompt offsets of ``token_ids`` moved to the prompt with its placeholders expanded."""
    placeholders = [i for i, t in enumerate(token_ids) if t == image_token_id]
    extra = [span.length - 1 for span in images.spans]
    return tuple(
        offset + sum(e for at, e in zip(placeholders, extra, strict=True) if at < offset)
        for offset in offsets
    )
