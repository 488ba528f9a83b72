"""Image parts of a chat request -> decoded, preprocessed images, or a 400 naming the
part; nothing is fetched over the network (docs/server.md, "Images").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ignition.model.vision.images import ImageInputError, ImagePolicy, load_image
from ignition.model.vision.preprocess import (
    ImageProcessing,
    ImageSizeError,
    PreparedImage,
    prepare_image,
)
from ignition.model.vision.prompt import PlaceholderError
from ignition.runtime.vision.inputs import RequestImages, expand_offsets, expand_request
from ignition.server.chat_protocol import ChatCompletionRequest, ImagePart, TokenizeChatRequest
from ignition.server.errors import ApiError

MAX_IMAGES_PER_REQUEST = 16


@dataclass(frozen=True)
class VisionServing:
    """What the server needs to accept images for its model."""

    image_token_id: int
    placeholder: str  # the text an image part becomes inside its message's content
    merge_size: int
    processing: ImageProcessing  # already bounded by the largest prepared vision program
    policy: ImagePolicy = field(default_factory=ImagePolicy)
    max_images: int = MAX_IMAGES_PER_REQUEST


def image_parts(body: ChatCompletionRequest | TokenizeChatRequest) -> list[tuple[str, str]]:
    """(part name, url) of every image part, in prompt order."""
    found = []
    for i, message in enumerate(body.messages):
        if isinstance(message.content, list):
            for j, part in enumerate(message.content):
                if isinstance(part, ImagePart):
                    found.append((f"messages[{i}].content[{j}].image_url", part.image_url.url))
    return found


def load_chat_images(
    body: ChatCompletionRequest | TokenizeChatRequest, vision: VisionServing | None
) -> list[PreparedImage]:
    """Decode and preprocess the request's images (blocking: run it off the event loop)."""
    parts = image_parts(body)
    if not parts:
        return []
    if vision is None:
        raise ApiError(
            400,
            f"{parts[0][0]}: this model has no vision encoder; it accepts text content only",
            param=parts[0][0],
        )
    if len(parts) > vision.max_images:
        raise ApiError(
            400,
            f"{parts[vision.max_images][0]}: the request has {len(parts)} images; at most "
            f"{vision.max_images} per request",
            param=parts[vision.max_images][0],
        )
    prepared = []
    for part, url in parts:
        try:
            prepared.append(prepare_image(load_image(url, part, vision.policy), vision.processing))
        except ImageInputError as err:
            raise ApiError(400, str(err), param=part) from None
        except ImageSizeError as err:
            raise ApiError(400, f"{part}: {err}", param=part) from None
    return prepared


def expand_chat_prompt(
    prompt_ids: Sequence[int],
    message_ends: Sequence[int],
    prepared: Sequence[PreparedImage],
    vision: VisionServing,
) -> tuple[list[int], RequestImages, tuple[int, ...]]:
    """(expanded prompt, its images, message ends moved to it); a 400 when the rendered
    prompt's image placeholders do not match the image parts (a template that drops an
    image, or an image pad typed as text)."""
    try:
        expanded, images = expand_request(
            prompt_ids, prepared, vision.image_token_id, vision.merge_size
        )
    except PlaceholderError as err:
        raise ApiError(400, f"messages: {err}", param="messages") from None
    ends = expand_offsets(message_ends, prompt_ids, images, vision.image_token_id)
    return expanded, images, ends
