"""Image placeholders in a tokenized prompt: expansion, spans and three-axis rope positions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ignition.model.vision.grid import ImageGrid


class PlaceholderError(ValueError):
    """The prompt's image placeholders do not match the images sent with it."""


@dataclass(frozen=True)
class ImageSpan:
    """Where one image's features sit in the expanded prompt (an atomic span)."""

    start: int
    length: int

    @property
    def stop(self) -> int:
        return self.start + self.length


@dataclass(frozen=True)
class MultimodalPositions:
    """Three position rows over the prompt and the offset decode positions continue from."""

    temporal: list[int]
    height: list[int]
    width: list[int]
    delta: int  # decode token at index i has position i + delta on all three axes


def expand_placeholders(
    token_ids: Sequence[int], grids: Sequence[ImageGrid], image_token_id: int, merge: int
) -> list[int]:
    """Each image token repeated once per feature of its image, in order."""
    found = sum(1 for t in token_ids if t == image_token_id)
    if found != len(grids):
        raise PlaceholderError(
            f"prompt has {found} image placeholder(s) but {len(grids)} image(s) were sent"
        )
    out: list[int] = []
    images = iter(grids)
    for token in token_ids:
        if token == image_token_id:
            out.extend([image_token_id] * next(images).num_features(merge))
        else:
            out.append(token)
    return out


def image_spans(token_ids: Sequence[int], image_token_id: int) -> list[ImageSpan]:
    """Runs of the image token in an expanded prompt (one per image)."""
    spans: list[ImageSpan] = []
    start = None
    for i, token in enumerate([*token_ids, None]):
        if token == image_token_id and start is None:
            start = i
        elif token != image_token_id and start is not None:
            spans.append(ImageSpan(start, i - start))
            start = None
    return spans


def multimodal_positions(
    token_ids: Sequence[int], grids: Sequence[ImageGrid], image_token_id: int, merge: int
) -> MultimodalPositions:
    """Three-axis rope positions of an expanded prompt whose spans hold ``grids`` in order."""
    spans = image_spans(token_ids, image_token_id)
    if len(spans) != len(grids):
        raise PlaceholderError(f"prompt has {len(spans)} image span(s) for {len(grids)} image(s)")
    t_pos: list[int] = []
    h_pos: list[int] = []
    w_pos: list[int] = []
    cursor = 0  # next token index
    position = 0  # next text position
    for span, grid in zip(spans, grids, strict=True):
        if span.length != grid.num_features(merge):
            raise PlaceholderError(
                f"image span at {span.start} has {span.length} tokens; its grid "
                f"{grid.t}x{grid.h}x{grid.w} needs {grid.num_features(merge)}"
            )
        for _ in range(span.start - cursor):
            t_pos.append(position)
            h_pos.append(position)
            w_pos.append(position)
            position += 1
        rows, cols = grid.h // merge, grid.w // merge
        for frame in range(grid.t):
            for r in range(rows):
                for c in range(cols):
                    t_pos.append(position + frame)
                    h_pos.append(position + r)
                    w_pos.append(position + c)
        cursor = span.stop
        position += max(rows, cols)
    for _ in range(len(token_ids) - cursor):
        t_pos.append(position)
        h_pos.append(position)
        w_pos.append(position)
        position += 1
    last = max(max(t_pos, default=-1), max(h_pos, default=-1), max(w_pos, default=-1))
    return MultimodalPositions(t_pos, h_pos, w_pos, last + 1 - len(token_ids))
