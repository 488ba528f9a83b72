"""A prompt chunk's image features: encoded at the request's first chunk (or by a vision
frame Helios scheduled), then bound chunk by chunk with their explicit rope positions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ignition.compiler.programs import Program
from ignition.compiler.staging import HostFrame
from ignition.helios import LaneWork
from ignition.runtime.executors.base import WorkerError
from ignition.runtime.executors.context import ExecutorContext
from ignition.runtime.vision_binding import ImageBindingError, RequestVision

if TYPE_CHECKING:
    from ignition.runtime.engine import LiveRequest


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
    program: Program, frame: HostFrame, vision: RequestVision, start: int, end: int
) -> None:
    """The prompt chunk's features (written to the workspace on the device, stream-ordered
    before the launch), their positions and the chunk's explicit rope positions."""
    try:
        piece = vision.chunk(start, end)
    except ImageBindingError as err:
        raise WorkerError(f"{program.descriptor.name}: {err}") from None
    inputs = program.inputs
    features = inputs.round.image_features if program.is_round else inputs.packed.image_features
    count = len(piece.positions)
    if features is None or count > features.shape[0]:
        raise WorkerError(f"{program.descriptor.name}: no room for {count} image features")
    if count:
        features[:count].copy_(piece.features.to(features.dtype))
        frame["image_positions"][:count] = piece.positions
    width = dict(program.uploads)["prompt_rope"] // 3
    frame["prompt_rope"][: 3 * width].reshape(3, width)[:, : end - start] = piece.rope
