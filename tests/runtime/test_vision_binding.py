"""Issue 13, worker binding of image features (runtime/vision/binding.py): a window's images
are encoded into the prepared feature storage from offset zero; a prompt chunk binds the
features of the images inside it at chunk-relative positions and its explicit rope rows;
chunks that split an image, or hold another window's image, are refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ignition.model.vision.grid import ImageGrid
from ignition.model.vision.preprocess import PreparedImage
from ignition.runtime.vision.binding import ImageBindingError, RequestVision
from ignition.runtime.vision.inputs import expand_request

IMAGE = 9
GRIDS = [ImageGrid(1, 4, 4), ImageGrid(1, 2, 4)]  # 4 and 2 features at merge 2
PROMPT = [1, 2, 7, IMAGE, 8, 3, 4, 7, IMAGE, 8, 5]


def request_images():
    prepared = [
        PreparedImage(np.full((g.num_patches, 3), i + 1, dtype=np.float32), g)
        for i, g in enumerate(GRIDS)
    ]
    return expand_request(PROMPT, prepared, IMAGE, 2)


def encoder(pixels, grids):
    """Feature f of an image = (image marker, f): checks which features land where."""
    out, row = [], 0
    for grid in grids:
        marker = float(pixels[row, 0])
        n = grid.num_features(2)
        out.append(torch.stack([torch.full((n,), marker), torch.arange(n).float()], 1))
        row += grid.num_patches
    return torch.cat(out)


def test_a_chunk_binds_its_images_features_at_chunk_relative_positions():
    _, images = request_images()
    vision = RequestVision.encode(images, None, encoder, torch.zeros(8, 2))
    first, second = images.spans
    piece = vision.chunk(first.start - 1, second.stop)
    assert piece.positions.tolist() == [
        *range(1, 1 + first.length),
        *range(second.start - first.start + 1, second.stop - first.start + 1),
    ]
    assert piece.features[:, 0].tolist() == [1.0] * 4 + [2.0] * 2
    assert piece.rope.tolist() == images.rope[:, first.start - 1 : second.stop].tolist()


def test_a_later_window_writes_its_features_from_offset_zero():
    _, images = request_images()
    storage = torch.full((4, 2), -5.0)
    vision = RequestVision.encode(images, (1,), encoder, storage)
    assert storage[:2].tolist() == [[2.0, 0.0], [2.0, 1.0]]
    second = images.spans[1]
    piece = vision.chunk(second.start, len(images.rope[0]))
    assert piece.features.tolist() == [[2.0, 0.0], [2.0, 1.0]]


def test_a_window_larger_than_the_feature_storage_is_refused():
    _, images = request_images()
    with pytest.raises(ImageBindingError, match="exceeds the prepared feature storage of 3"):
        RequestVision.encode(images, None, encoder, torch.zeros(3, 2))


def test_a_chunk_that_splits_an_image_span_is_refused():
    _, images = request_images()
    vision = RequestVision.encode(images, None, encoder, torch.zeros(8, 2))
    first = images.spans[0]
    with pytest.raises(ImageBindingError, match="splits the image span"):
        vision.chunk(0, first.start + 1)


def test_a_chunk_holding_another_windows_image_is_refused():
    _, images = request_images()
    vision = RequestVision.encode(images, (0,), encoder, torch.zeros(4, 2))
    with pytest.raises(ImageBindingError, match="not in the active vision window"):
        vision.chunk(0, len(images.rope[0]))


def test_replayed_output_past_the_prompt_takes_the_rope_offset_not_explicit_positions():
    _, images = request_images()
    vision = RequestVision.encode(images, None, encoder, torch.zeros(8, 2))
    n = images.rope.shape[1]
    piece = vision.chunk(n - 2, n + 3)
    assert (piece.rope[:, 2:] == -1).all() and (piece.rope[:, :2] >= 0).all()
