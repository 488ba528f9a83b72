"""Issue 31: a tiny random Qwen4ExpForConditionalGeneration answers a prompt with two images,
longer than its QSA index budget, exactly as transformers' greedy ``generate`` does: image
features at their placeholders, multimodal rope through the indexer's block keys (roped at
each block's first position, image positions included) and its ring."""

from __future__ import annotations

import pytest
import torch

from ignition.model.vision.preprocess import prepare_image
from ignition.model.vision.request import MultimodalPrompt
from ignition.model.weights import load_checkpoint
from tests.model.hf_checkpoints import randomize_vision, rewrite_tensors, write_qwen4_exp
from tests.model.vision.test_image_generation import (
    END,
    IMAGE,
    SETTINGS,
    START,
    ignition_greedy,
    images,
    transformers_greedy,
)

pytest.importorskip("transformers")

PROMPT = [11, 400, 9, 31, START, IMAGE, END, 93, 1200, 17, START, IMAGE, END, 64, 3000, 18, 2, 44]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    path = tmp_path_factory.mktemp("qwen4-vl")
    reference = write_qwen4_exp(path, seed=9, multimodal=True)
    tensors = randomize_vision(reference, seed=10)
    rewrite_tensors(path, lambda all_tensors: all_tensors.update(tensors))
    return load_checkpoint(path).model, reference


def test_two_image_prompt_greedy_tokens_match_transformers_generate(pair):
    model, reference = pair
    prepared = [prepare_image(image, SETTINGS) for image in images()]
    prompt = MultimodalPrompt.build(
        PROMPT,
        [torch.from_numpy(p.pixels) for p in prepared],
        [p.grid for p in prepared],
        IMAGE,
        2,
        model.visual,
    )
    assert prompt.rope_delta != 0
    assert len(prompt.token_ids) > 2 * model.config.qsa_indexer.budget
    assert ignition_greedy(model, prompt) == transformers_greedy(reference, prompt, prepared)
