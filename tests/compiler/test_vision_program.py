"""Issue 13 deliverable 3: vision programs are built and validated like the others; a
prepared program encodes packed images exactly as the eager tower does."""

from __future__ import annotations

import pytest
import torch

from ignition.compiler.graph import GraphCapturer
from ignition.compiler.programs import ProgramError, build_program, check_buildable
from ignition.compiler.validate import ValidationError, validate_program
from ignition.compiler.vision_program import bind_images
from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.model.config import ModelConfig
from ignition.model.config_vision import VisionConfig
from ignition.model.model import HybridModel
from ignition.model.vision.grid import ImageGrid
from ignition.model.weights import randomize_

VISION = VisionConfig(
    hidden_size=32,
    num_hidden_layers=1,
    num_attention_heads=2,
    patch_size=4,
    num_position_embeddings=64,
)


@pytest.fixture(scope="module")
def model() -> HybridModel:
    return randomize_(HybridModel(ModelConfig.tiny(vision=VISION)), seed=3).eval()


def prepared(model: HybridModel, patches: int):
    d = Descriptor(GraphKind.VISION, 2, 0, patches, patches)
    program = build_program(d, model, None, None, None, None)
    return program, GraphCapturer("cpu").prepare(d.name, program.fn, program.inputs)


def test_prepared_vision_program_matches_the_eager_tower_on_two_packed_images(model):
    program, graph = prepared(model, 64)
    grids = [ImageGrid(1, 4, 6), ImageGrid(1, 4, 4)]
    generator = torch.Generator().manual_seed(0)
    pixels = [torch.randn(g.num_patches, 96, generator=generator) for g in grids]
    assert bind_images(program.inputs, model.visual, pixels, grids) == 10
    got = graph.run().features[:10]
    with torch.no_grad():
        expected = model.visual(torch.cat(pixels), grids)
    assert got.shape == (10, model.config.hidden_size)
    assert (got - expected).abs().max().item() <= 1e-5


def test_vision_program_validates_on_a_capacity_filling_image(model):
    program, graph = prepared(model, 64)
    result = validate_program(program, graph, None, None, [1], model.config.vocab_size)
    assert result.num_tokens == 64


def test_validation_fails_when_the_program_diverges_from_the_tower(model):
    program, graph = prepared(model, 64)
    graph.fn = lambda x: type(program.fn(x))(program.fn(x).features + 1.0)
    with pytest.raises(ValidationError, match="differ from the eager encoder"):
        validate_program(program, graph, None, None, [1], model.config.vocab_size)


def test_vision_program_runs_without_a_host_sync(model):
    from ignition.compiler.host_sync import HostSyncDetector

    program, _graph = prepared(model, 64)
    bind_images(program.inputs, model.visual, [torch.randn(64, 96)], [ImageGrid(1, 8, 8)])
    with torch.no_grad(), HostSyncDetector(program.descriptor.name):
        program.fn(program.inputs)


def test_towerless_model_cannot_build_a_vision_program():
    plain = HybridModel(ModelConfig.tiny())
    with pytest.raises(ProgramError, match="needs a vision tower"):
        check_buildable(Descriptor(GraphKind.VISION, 1, 0, 64, 64), plain)


def test_runner_encodes_each_image_on_the_smallest_program_that_holds_it(model):
    from ignition.compiler.vision_program import VisionRunner

    runner = VisionRunner([prepared(model, 64), prepared(model, 256)])
    grids = [ImageGrid(1, 8, 8), ImageGrid(1, 12, 12), ImageGrid(1, 2, 4)]
    pixels = torch.randn(sum(g.num_patches for g in grids), 96)
    with torch.no_grad():
        expected = model.visual(pixels, grids)
    assert (runner(pixels, grids) - expected).abs().max().item() <= 1e-5
    with pytest.raises(ValueError, match="exceeds the largest vision program"):
        runner(torch.zeros(400, 96), [ImageGrid(1, 20, 20)])


def test_preprocessing_bounded_by_the_largest_program_never_exceeds_it():
    from ignition.model.vision.preprocess import ImageProcessing, fit_to_grid

    settings = ImageProcessing(patch_size=4, min_pixels=64).bounded(256)
    for height, width in [(1000, 1000), (300, 40), (64, 64)]:
        h, w = fit_to_grid(height, width, settings)
        assert (h // 4) * (w // 4) <= 256
