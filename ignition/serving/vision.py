"""What the server needs to accept images for a model with a vision tower: placeholder text
and preprocessing, bounded by the largest prepared vision program."""

from __future__ import annotations

import sys
from pathlib import Path

from ignition.runtime.bundle import Bundle
from ignition.server.images import VisionServing


def vision_serving(bundle: Bundle, allowed_folder: str | None = None) -> VisionServing | None:
    """None without a vision tower, or when the tokenizer does not round-trip the vision
    start, image and end tokens (with a warning)."""
    from ignition.model.vision.images import ImagePolicy
    from ignition.model.vision.preprocess import ImageProcessing

    model = bundle.model
    config = model.config
    if model.visual is None or config.image_token_id is None:
        return None
    ids = [
        i
        for i in (config.vision_start_token_id, config.image_token_id, config.vision_end_token_id)
        if i is not None
    ]
    placeholder = bundle.decode(ids, skip_special_tokens=False)
    if bundle.encode_rendered([placeholder])[0] != ids:
        print(
            f"warning: {bundle.path}: the tokenizer does not spell the image tokens {ids} as "
            f"{placeholder!r}; image inputs are off",
            file=sys.stderr,
        )
        return None
    vision = model.visual.config
    checkpoint = Path(bundle.manifest["checkpoint"]["path"])
    if not checkpoint.is_absolute():
        checkpoint = bundle.path / checkpoint
    processing = ImageProcessing.for_checkpoint(
        checkpoint, vision.patch_size, vision.temporal_patch_size, vision.spatial_merge_size
    )
    if bundle.catalog.max_patch_capacity():
        processing = processing.bounded(bundle.catalog.max_patch_capacity())
    return VisionServing(
        image_token_id=config.image_token_id,
        placeholder=placeholder,
        merge_size=vision.spatial_merge_size,
        processing=processing,
        policy=ImagePolicy(allowed_folder=Path(allowed_folder) if allowed_folder else None),
    )
