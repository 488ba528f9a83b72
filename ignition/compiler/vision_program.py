"""The program builder for ``vision`` descriptors: the image encoder at a patch capacity.

Owns its padded inputs and returns merged features; shares nothing with the text workspace.
Validation compares it with the eager encoder on a synthetic image.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ignition.components.descriptor import Descriptor
from ignition.model.model import HybridModel
from ignition.model.vision.encoder import VisionBatch, VisionEncoder
from ignition.model.vision.grid import ImageGrid

VALIDATION_TOLERANCE = 1e-3  # eager vs prepared, relative to the feature scale


@dataclass
class VisionProgramInputs:
    pixels: Tensor  # [P, C * T * patch * patch]
    batch: VisionBatch


@dataclass
class VisionProgramOutputs:
    features: Tensor  # [P / merge**2, text hidden]


def patch_dim(encoder: VisionEncoder) -> int:
    c = encoder.config
    return c.in_channels * c.temporal_patch_size * c.patch_size**2


def check_vision_buildable(d: Descriptor, model: HybridModel) -> str | None:
    """Why the model cannot run this vision descriptor, or None."""
    if model.visual is None:
        return "a vision program needs a vision tower; the checkpoint has none"
    unit = model.visual.config.spatial_merge_size**2
    if d.patch_capacity % unit:
        return f"patch capacity {d.patch_capacity} is not a multiple of merge**2 = {unit}"
    return None


def build_vision_inputs(d: Descriptor, encoder: VisionEncoder) -> VisionProgramInputs:
    device = encoder.pos_embed.weight.device
    dtype = encoder.pos_embed.weight.dtype
    pixels = torch.zeros(d.patch_capacity, patch_dim(encoder), device=device, dtype=dtype)
    return VisionProgramInputs(pixels, encoder.metadata([], d.patch_capacity, device))


def build_vision_program(
    d: Descriptor, model: HybridModel
) -> tuple[VisionProgramInputs, VisionRun]:
    """The inputs and function of a program running the tower at d's patch capacity."""
    encoder = model.visual
    assert encoder is not None  # check_buildable ran first
    return build_vision_inputs(d, encoder), VisionRun(encoder)


class VisionRun:
    """A vision program's function; keeps its encoder for binding and validation."""

    def __init__(self, encoder: VisionEncoder) -> None:
        self.encoder = encoder

    def __call__(self, x: VisionProgramInputs) -> VisionProgramOutputs:
        return VisionProgramOutputs(self.encoder.forward_packed(x.pixels, x.batch))


def bind_images(
    inputs: VisionProgramInputs,
    encoder: VisionEncoder,
    pixels: Sequence[Tensor],
    grids: Sequence[ImageGrid],
) -> int:
    """Write images (in order) into a program's inputs; returns the features they yield."""
    capacity = inputs.pixels.shape[0]
    batch = encoder.metadata(grids, capacity, inputs.pixels.device)
    clear_vision_inputs(inputs)
    row = 0
    for patches in pixels:
        inputs.pixels[row : row + patches.shape[0]] = patches.to(inputs.pixels)
        row += patches.shape[0]
    for name in ("tap_index", "tap_weight", "cos", "sin", "segment"):
        getattr(inputs.batch, name).copy_(getattr(batch, name))
    return sum(g.num_features(encoder.config.spatial_merge_size) for g in grids)


def clear_vision_inputs(inputs: VisionProgramInputs) -> None:
    inputs.pixels.zero_()
    inputs.batch.tap_index.zero_()
    inputs.batch.tap_weight.zero_()
    inputs.batch.cos.fill_(1.0)
    inputs.batch.sin.zero_()
    inputs.batch.segment.fill_(-1)


def validation_grid(d: Descriptor, encoder: VisionEncoder) -> ImageGrid:
    """The squarest single-frame grid of whole merge blocks that fills the capacity."""
    merge = encoder.config.spatial_merge_size
    blocks = d.patch_capacity // (merge * merge)
    rows = max(r for r in range(1, int(blocks**0.5) + 1) if blocks % r == 0)
    return ImageGrid(1, rows * merge, blocks // rows * merge)


def pick_vision_program(programs: Sequence, num_patches: int):
    """The smallest prepared vision program holding ``num_patches``, or None."""
    fitting = [p for p in programs if p[0].descriptor.patch_capacity >= num_patches]
    return min(fitting, key=lambda p: p[0].descriptor.patch_capacity, default=None)


class VisionRunner:
    """Encodes images through prepared vision programs, one image per run, on the smallest
    program that holds its patches (larger than :meth:`max_patches` is an error)."""

    def __init__(self, programs: Sequence) -> None:
        self.programs = [p for p in programs if isinstance(p[0].inputs, VisionProgramInputs)]
        if not self.programs:
            raise ValueError("no prepared vision programs")

    @property
    def max_patches(self) -> int:
        return max(p[0].descriptor.patch_capacity for p in self.programs)

    def __call__(self, pixels: Tensor, grids: Sequence[ImageGrid]) -> Tensor:
        out = []
        row = 0
        for grid in grids:
            picked = pick_vision_program(self.programs, grid.num_patches)
            if picked is None:
                raise ValueError(
                    f"an image of {grid.num_patches} patches exceeds the largest vision "
                    f"program ({self.max_patches})"
                )
            program, prepared = picked
            patches = pixels[row : row + grid.num_patches]
            row += grid.num_patches
            count = bind_images(program.inputs, program.fn.encoder, [patches], [grid])
            out.append(prepared.run().features[:count].clone())
        return torch.cat(out)
