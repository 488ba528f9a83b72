"""A tiny random Qwen3.5 with vision, saved by transformers, whose tokenizer spells the
vision tokens (``<|vision_start|>``, ``<|image_pad|>``, ``<|vision_end|>``) as the published
checkpoints do: special tokens the tokenizer splits out whole. The embedded tokenizer has
4096 ids, so the three are added after it and the model's vocabulary is 4100."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from tokenizers import AddedToken, Tokenizer

from ignition.model.vision.preprocess import ImageProcessing
from tests.model.hf_checkpoints import Variant, rewrite_tensors, write_qwen35

START, END, IMAGE, VIDEO = 4096, 4097, 4098, 4099
PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>"
PROCESSING = ImageProcessing(patch_size=4, min_pixels=64, max_pixels=24 * 24)


def randomize_vision(model, seed: int) -> dict[str, torch.Tensor]:
    """Non-trivial tower weights (transformers' init leaves them small)."""
    generator = torch.Generator().manual_seed(seed)
    out = {}
    with torch.no_grad():
        for name, param in model.model.visual.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            if "norm" in name:
                value = (1.0 if name.endswith("weight") else 0.0) + 0.2 * noise
            elif "pos_embed" in name:
                value = noise
            else:
                value = noise / param[0].numel() ** 0.5
            param.copy_(value)
            out[f"model.visual.{name}"] = value.clone()
    return out


def write_vision_checkpoint(path: Path, seed: int = 9) -> torch.nn.Module:
    """Write the checkpoint (with an MTP head and a preprocessor_config.json); returns the
    transformers model holding the same weights."""
    variant = Variant(seed=seed, vocab_size=4100, vision_tokens=(IMAGE, VIDEO, START, END))
    reference = write_qwen35(path, variant)
    tensors = randomize_vision(reference, seed + 1)
    rewrite_tensors(path, lambda all_tensors: all_tensors.update(tensors))
    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    names = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>")
    tokenizer.add_special_tokens([AddedToken(n, special=True, normalized=False) for n in names])
    assert [tokenizer.token_to_id(n) for n in names] == [START, END, IMAGE]
    tokenizer.save(str(path / "tokenizer.json"))
    (path / "preprocessor_config.json").write_text(
        json.dumps(
            {
                "patch_size": PROCESSING.patch_size,
                "temporal_patch_size": PROCESSING.temporal_patch_size,
                "merge_size": PROCESSING.merge_size,
                "min_pixels": PROCESSING.min_pixels,
                "max_pixels": PROCESSING.max_pixels,
                "image_mean": list(PROCESSING.image_mean),
                "image_std": list(PROCESSING.image_std),
            }
        )
    )
    return reference


def noise_image(width: int, height: int, seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8), "RGB")


def data_url(image: Image.Image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()
