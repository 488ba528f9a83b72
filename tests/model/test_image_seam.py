"""Image features are written at the prompt row's packed offset."""

from __future__ import annotations

import torch

from ignition.model.packing import PackedCapacity, PackedInputs
from tests.model.conftest import new_state
from tests.model.helpers import PROMPT_CAPACITY, prefill

PROMPT = [1, 3, 3, 3, 20, 21, 22]  # token 3 is the tiny config's image placeholder
IMAGE_POSITIONS = [1, 2, 3]


def _features(config):
    return torch.randn(
        len(IMAGE_POSITIONS), config.hidden_size, generator=torch.Generator().manual_seed(3)
    )


def _prompt_logits(model, config, state, rows, slots, prefill_row, features):
    capacity = PackedCapacity.mixed(len(rows), 2, PROMPT_CAPACITY)
    inputs = PackedInputs.build(
        capacity,
        rows,
        slots,
        prefill_row=prefill_row,
        hidden_size=config.hidden_size,
        image_features=features,
        image_positions=IMAGE_POSITIONS if features is not None else (),
        max_image_tokens=len(IMAGE_POSITIONS),
    )
    with torch.no_grad():
        out = model.forward_packed(inputs, capacity, state)
    cu = out.meta.cu_query_lens.tolist()
    return out.logits[cu[prefill_row] : cu[prefill_row + 1]]


def test_image_features_change_only_positions_from_the_image_on(config, model):
    plain = _prompt_logits(model, config, new_state(config), [PROMPT], [0], 0, None)
    with_image = _prompt_logits(
        model, config, new_state(config), [PROMPT], [0], 0, _features(config)
    )
    torch.testing.assert_close(with_image[:1], plain[:1])
    assert not torch.allclose(with_image[1:], plain[1:])


def test_image_features_follow_the_prompt_packed_offset(config, model):
    state = new_state(config)
    prefill(model, state, 1, [5, 6, 7])
    alone = _prompt_logits(model, config, state.clone(), [PROMPT], [0], 0, _features(config))
    behind_decoder = _prompt_logits(
        model, config, state.clone(), [[8, 9], PROMPT], [1, 0], 1, _features(config)
    )
    torch.testing.assert_close(behind_decoder, alone, atol=1e-4, rtol=1e-4)
