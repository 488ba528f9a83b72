"""Issue 13 deliverable 5 (single window): a random tiny Qwen3.5 with vision saved by
transformers answers a prompt with two images exactly as transformers' greedy ``generate``
does on the same inputs, through the packed forward's image-feature seam and multimodal rope."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors
from ignition.model.step import run_step
from ignition.model.vision.preprocess import ImageProcessing, prepare_image
from ignition.model.vision.request import MultimodalPrompt
from ignition.model.weights import load_checkpoint
from tests.model.conftest import new_state
from tests.model.hf_checkpoints import Variant, randomize_vision, rewrite_tensors, write_qwen35

pytest.importorskip("transformers")

IMAGE, START, END = 5, 7, 8
NUM_TOKENS = 12
SETTINGS = ImageProcessing(patch_size=4, min_pixels=64, max_pixels=24 * 24)
PROMPT = [11, 400, START, IMAGE, END, 93, 1200, START, IMAGE, END, 64, 3000, 18]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    path = tmp_path_factory.mktemp("vl")
    reference = write_qwen35(path, Variant(seed=9, mtp=False))
    tensors = randomize_vision(reference, seed=10)
    rewrite_tensors(path, lambda all_tensors: all_tensors.update(tensors))
    return load_checkpoint(path).model, reference


def images():
    rng = np.random.default_rng(3)
    sizes = [(20, 28), (16, 12)]
    return [
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), "RGB") for w, h in sizes
    ]


def transformers_greedy(reference, prompt: MultimodalPrompt, prepared) -> list[int]:
    ids = torch.tensor([prompt.token_ids])
    with torch.no_grad():
        out = reference.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            mm_token_type_ids=(ids == IMAGE).int(),
            pixel_values=torch.from_numpy(np.concatenate([p.pixels for p in prepared])),
            image_grid_thw=torch.tensor([[p.grid.t, p.grid.h, p.grid.w] for p in prepared]),
            max_new_tokens=NUM_TOKENS,
            do_sample=False,
        )
    return out[0, ids.shape[1] :].tolist()


def ignition_greedy(model, prompt: MultimodalPrompt) -> list[int]:
    state = new_state(model.config)
    n = len(prompt.token_ids)
    capacity = PackedCapacity.mixed(1, 1, 64)
    piece = prompt.chunk(0, n)
    inputs = PackedInputs.build(
        capacity,
        [piece.token_ids],
        [0],
        prefill_row=0,
        hidden_size=model.config.hidden_size,
        image_features=piece.image_features,
        image_positions=piece.image_positions,
    )
    inputs.prompt_rope = torch.full((3, 64), -1, dtype=torch.int32)
    inputs.prompt_rope[:, :n] = piece.rope
    inputs.rope_offset = torch.tensor([prompt.rope_delta], dtype=torch.int32)
    tokens = [
        int(run_step(model, state, inputs, capacity, SamplingTensors.greedy(1)).next_tokens[0])
    ]
    while len(tokens) < NUM_TOKENS:
        capacity = PackedCapacity.mixed(1, 1, 0)
        step = PackedInputs.build(capacity, [[tokens[-1]]], [0])
        step.rope_offset = torch.tensor([prompt.rope_delta], dtype=torch.int32)
        out = run_step(model, state, step, capacity, SamplingTensors.greedy(1))
        tokens.append(int(out.next_tokens[0]))
    return tokens


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
    assert len(prompt.spans) == 2 and prompt.rope_delta != 0
    expected = transformers_greedy(reference, prompt, prepared)
    assert ignition_greedy(model, prompt) == expected


def test_prompt_logits_with_images_match_transformers_within_1e_4(pair):
    model, reference = pair
    prepared = [prepare_image(image, SETTINGS) for image in images()]
    pixels = [torch.from_numpy(p.pixels) for p in prepared]
    grids = [p.grid for p in prepared]
    prompt = MultimodalPrompt.build(PROMPT, pixels, grids, IMAGE, 2, model.visual)
    ids = torch.tensor([prompt.token_ids])
    with torch.no_grad():
        expected = reference(
            input_ids=ids,
            mm_token_type_ids=(ids == IMAGE).int(),
            pixel_values=torch.cat(pixels),
            image_grid_thw=torch.tensor([[g.t, g.h, g.w] for g in grids]),
            use_cache=False,
        ).logits[0, -1]
    state = new_state(model.config)
    capacity = PackedCapacity.mixed(1, 1, 64)
    piece = prompt.chunk(0, len(prompt.token_ids))
    inputs = PackedInputs.build(
        capacity,
        [piece.token_ids],
        [0],
        prefill_row=0,
        hidden_size=model.config.hidden_size,
        image_features=piece.image_features,
        image_positions=piece.image_positions,
    )
    inputs.prompt_rope = torch.full((3, 64), -1, dtype=torch.int32)
    inputs.prompt_rope[:, : piece.rope.shape[1]] = piece.rope
    out = run_step(model, state, inputs, capacity, SamplingTensors.greedy(1))
    ours = out.target.logits[len(prompt.token_ids) - 1]
    torch.testing.assert_close(ours, expected.float(), atol=1e-4, rtol=0)


def test_without_its_images_the_answer_differs(pair):
    """The images matter: the seam is not silently dropping them."""
    model, _ = pair
    prepared = [prepare_image(image, SETTINGS) for image in images()]
    pixels = [torch.from_numpy(p.pixels) for p in prepared]
    grids = [p.grid for p in prepared]
    prompt = MultimodalPrompt.build(PROMPT, pixels, grids, IMAGE, 2, model.visual)
    blank = MultimodalPrompt.build(
        PROMPT, [torch.zeros_like(p) for p in pixels], grids, IMAGE, 2, model.visual
    )
    assert ignition_greedy(model, prompt) != ignition_greedy(model, blank)


def test_features_from_prepared_vision_programs_give_the_same_answer(pair):
    from ignition.compiler.graph import GraphCapturer
    from ignition.compiler.programs import build_program
    from ignition.compiler.vision_program import VisionRunner
    from ignition.components.descriptor import Descriptor
    from ignition.components.program_kinds import GraphKind

    model, reference = pair
    programs = []
    for patches in (64, 256):
        d = Descriptor(GraphKind.VISION, 1, 0, patches, patches)
        program = build_program(d, model, None, None, None, None)
        programs.append((program, GraphCapturer("cpu").prepare(d.name, program.fn, program.inputs)))
    prepared = [prepare_image(image, SETTINGS) for image in images()]
    pixels = [torch.from_numpy(p.pixels) for p in prepared]
    grids = [p.grid for p in prepared]
    prompt = MultimodalPrompt.build(PROMPT, pixels, grids, IMAGE, 2, VisionRunner(programs))
    assert ignition_greedy(model, prompt) == transformers_greedy(reference, prompt, prepared)
