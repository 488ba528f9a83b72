"""A prompt with images, ready for the packed forward; an image never straddles a chunk."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ignition.model.vision.grid import ImageGrid
from ignition.model.vision.prompt import (
    ImageSpan,
    expand_placeholders,
    image_spans,
    multimodal_positions,
)


@dataclass(frozen=True)
class PromptChunk:
    """What one prefill chunk [start, stop) of a multimodal prompt adds to a packed step."""

    token_ids: list[int]
    image_features: Tensor  # [F, hidden] features whose placeholders are in the chunk
    image_positions: list[int]  # chunk-relative index of each feature
    rope: Tensor  # [3, stop - start] int32 explicit rope positions


@dataclass(frozen=True)
class MultimodalPrompt:
    token_ids: list[int]  # placeholders expanded
    features: Tensor  # [num image tokens, hidden] in prompt order
    rope: Tensor  # [3, len(token_ids)] int32
    rope_delta: int  # decode rope position = sequence position + rope_delta
    spans: list[ImageSpan]

    @classmethod
    def build(
        cls,
        token_ids: Sequence[int],
        pixels: Sequence[Tensor],
        grids: Sequence[ImageGrid],
        image_token_id: int,
        merge: int,
        encode: Callable[[Tensor, Sequence[ImageGrid]], Tensor],
    ) -> MultimodalPrompt:
        """``encode(pixels, grids) -> features`` is the vision tower (or a prepared program)."""
        expanded = expand_placeholders(token_ids, grids, image_token_id, merge)
        positions = multimodal_positions(expanded, grids, image_token_id, merge)
        with torch.no_grad():
            features = encode(torch.cat(list(pixels)), grids) if grids else torch.zeros(0, 1)
        rope = torch.tensor(
            [positions.temporal, positions.height, positions.width], dtype=torch.int32
        )
        return cls(expanded, features, rope, positions.delta, image_spans(expanded, image_token_id))

    def splits_an_image(self, start: int, stop: int) -> bool:
        """Whether a chunk [start, stop) cuts through an image's atomic span."""
        return any(s.start < stop < s.stop or s.start < start < s.stop for s in self.spans)

    def chunk(self, start: int, stop: int) -> PromptChunk:
        if self.splits_an_image(start, stop):
            raise ValueError(f"prompt chunk [{start}, {stop}) splits an image span")
        index = 0
        rows: list[int] = []
        positions: list[int] = []
        for span in self.spans:
            if start <= span.start and span.stop <= stop:
                rows.extend(range(index, index + span.length))
                positions.extend(range(span.start - start, span.stop - start))
            index += span.length
        return PromptChunk(
            token_ids=self.token_ids[start:stop],
            image_features=self.features[rows] if rows else self.features[:0],
            image_positions=positions,
            rope=self.rope[:, start:stop],
        )
