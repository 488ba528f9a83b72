"""A prompt chunk's image features: encoded once, then bound chunk by chunk."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ignition.compiler.programs import Program
from ignition.compiler.staging import HostFrame
from ignition.helios import LaneWork
from ignition.runtime.executors.base import WorkerError
from ignition.runtime.executors.context import ExecutorContext
from ignition.runtime.vision.binding import ImageBindingError, RequestVision

if TYPE_CHECKING:
    from ignition.runtime.requests.table import LiveRequest


def request_vision(
    context: ExecutorContext, program: Program, lane: LaneWork, live: LiveRequest
) -> RequestVision | None:
    """The request's encoded images (encoded at its first prompt chunk), or None."""
    images = live.request.images
    if images is None:
        return None
    name = program.descriptor.name
    if "rope_offset" not in dict(program.uploads):
        raise WorkerError(f"{name}: a request with images needs a multimodal program")
    vision = context.ledger.vision.get(lane.handle)
    if vision is None:
        if context.encode_images is None or context.feature_storage is None:
            raise WorkerError(f"{name}: a request with images, and no vision encoder")
        try:
            vision = RequestVision.encode(
                images,
                live.vision_window,
                context.encode_images,
                context.feature_storage[lane.handle.slot],
            )
        except ImageBindingError as err:
            raise WorkerError(f"{name}: {err}") from None
        context.ledger.vision[lane.handle] = vision
    return vision


def bind_images(
    program: Program,
    frame: HostFrame,
    vision: RequestVision,
    start: int,
    end: int,
    lane: int = 0,
    first: int = 0,
) -> int:
    """Bind the chunk's image features from ``first`` on in lane ``lane``; returns how many."""
    d = program.descriptor
    try:
        piece = vision.chunk(start, end)
    except ImageBindingError as err:
        raise WorkerError(f"{d.name}: {err}") from None
    inputs = program.inputs
    features = inputs.round.image_features if program.is_round else inputs.packed.image_features
    count = len(piece.positions)
    if features is None or first + count > features.shape[0]:
        raise WorkerError(f"{d.name}: no room for {first + count} image features")
    width = dict(program.uploads)["prompt_rope"] // 3
    lane_start = lane * (width // d.prompt_lanes)
    if count:
        features[first : first + count].copy_(piece.features.to(features.dtype))
        positions = [lane_start + p for p in piece.positions]
        frame["image_positions"][first : first + count] = positions
    rope = frame["prompt_rope"][: 3 * width].reshape(3, width)
    rope[:, lane_start : lane_start + end - start] = piece.rope
    return count
