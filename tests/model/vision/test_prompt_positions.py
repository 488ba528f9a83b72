"""Issue 13 deliverable 2: placeholder expansion with the vision start/end tokens and the
prompt's multimodal rope positions (checked against transformers' ``get_rope_index``)."""

from __future__ import annotations

import pytest
import torch

from ignition.model.vision.grid import ImageGrid
from ignition.model.vision.prompt import (
    PlaceholderError,
    expand_placeholders,
    image_spans,
    multimodal_positions,
)

tf = pytest.importorskip("transformers")

IMAGE, START, END = 5, 7, 8


def transformers_positions(ids: list[int], grids: list[ImageGrid]):
    from tests.model.hf_checkpoints import VISION, text_config

    config = tf.Qwen3_5Config(
        text_config=text_config(moe=False, tie=False),
        vision_config=VISION,
        image_token_id=IMAGE,
        vision_start_token_id=START,
        vision_end_token_id=END,
    )
    model = tf.Qwen3_5Model(config)
    input_ids = torch.tensor([ids])
    positions, delta = model.get_rope_index(
        input_ids,
        mm_token_type_ids=(input_ids == IMAGE).int(),
        image_grid_thw=torch.tensor([[g.t, g.h, g.w] for g in grids]),
    )
    return positions[:, 0].tolist(), int(delta[0, 0])


def test_each_placeholder_becomes_one_token_per_merged_feature():
    prompt = [1, START, IMAGE, END, 9, START, IMAGE, END, 10]
    expanded = expand_placeholders(prompt, [ImageGrid(1, 4, 6), ImageGrid(1, 2, 2)], IMAGE, 2)
    assert expanded == [1, START, *[IMAGE] * 6, END, 9, START, IMAGE, END, 10]
    assert [(s.start, s.length) for s in image_spans(expanded, IMAGE)] == [(2, 6), (11, 1)]


def test_placeholder_count_must_match_the_images_sent():
    with pytest.raises(PlaceholderError, match="1 image placeholder"):
        expand_placeholders([START, IMAGE, END], [ImageGrid(1, 2, 2)] * 2, IMAGE, 2)


@pytest.mark.parametrize(
    "grids", [[ImageGrid(1, 4, 6)], [ImageGrid(1, 6, 2), ImageGrid(1, 2, 2), ImageGrid(1, 8, 4)]]
)
def test_multimodal_rope_positions_match_transformers(grids):
    prompt = [1, 11]
    for i, _ in enumerate(grids):
        prompt += [START, IMAGE, END, 20 + i, 21]
    expanded = expand_placeholders(prompt, grids, IMAGE, 2)
    ours = multimodal_positions(expanded, grids, IMAGE, 2)
    expected, delta = transformers_positions(expanded, grids)
    assert [ours.temporal, ours.height, ours.width] == expected
    assert ours.delta == delta


def test_text_only_prompt_positions_are_the_token_index():
    ours = multimodal_positions([1, 2, 3], [], IMAGE, 2)
    assert ours.temporal == ours.height == ours.width == [0, 1, 2] and ours.delta == 0
