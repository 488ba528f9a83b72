"""Issue 13's end-to-end case: a tiny random Qwen3.5 with vision, saved by transformers,
whose tokenizer spells the vision tokens (``<|vision_start|>``, ``<|image_pad|>``,
``<|vision_end|>``) as the published checkpoints do: special tokens the tokenizer splits out
whole. The embedded tokenizer has 4096 ids, so the three are added after it and the model's
vocabulary is 4100. ``build_vision_case`` builds its bundle and transformers' greedy answer
to a two-image chat prompt (the ``vision_case`` fixture of tests/conftest.py)."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import numpy as np
import torch
from click.testing import CliRunner
from PIL import Image
from tokenizers import AddedToken, Tokenizer

from ignition.cli import main
from ignition.model.vision.preprocess import ImageProcessing, prepare_image
from ignition.runtime.vision.inputs import expand_request
from tests.model.hf_checkpoints import Variant, randomize_vision, rewrite_tensors, write_qwen35

START, END, IMAGE, VIDEO = 4096, 4097, 4098, 4099
PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>"
PROCESSING = ImageProcessing(patch_size=4, min_pixels=64, max_pixels=24 * 24)
CHATML = (
    "{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


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
    # plain ChatML renders the prompts here (the embedded default's Qwen3.5-style template
    # would open a <think> block that the reference prompt below does not have)
    config = json.loads((path / "tokenizer_config.json").read_text())
    config["chat_template"] = CHATML
    (path / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
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


NUM_TOKENS = 12
EOS = 2
IMAGES = [noise_image(20, 28, seed=3), noise_image(16, 12, seed=4)]
# ~120 text tokens between the images: the second image's span crosses the 128-token chunk
TEXTS = ["Look at this: ", " and then, after a long story, " + "once upon a time " * 19, " ok?"]


def content(urls: list[str] | None = None) -> list[dict]:
    """The chat content: text, image, text, image, text (``urls``: base64 data URLs)."""
    urls = urls or [data_url(image) for image in IMAGES]
    parts: list[dict] = [{"type": "text", "text": TEXTS[0]}]
    for url, text in zip(urls, TEXTS[1:], strict=True):
        parts.append({"type": "image_url", "image_url": {"url": url}})
        parts.append({"type": "text", "text": text})
    return parts


def build_vision_case(tmp_path_factory):
    """(bundle, transformers' greedy tokens, the expanded prompt, its images, tokenizer).

    The bundle has 128-token prompt chunks, two request slots and mixed programs; the
    prompt is the ChatML rendering of ``content()``."""
    weights = tmp_path_factory.mktemp("vision-weights")
    reference = write_vision_checkpoint(weights)
    bundle = tmp_path_factory.mktemp("vision-bundle")
    args = ["build", "--weights", str(weights), "--out", str(bundle), "--device", "cpu"]
    args += ["--max-prefill-chunk", "128", "--concurrency", "2", "--mixed-prefill"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    tokenizer = Tokenizer.from_file(str(weights / "tokenizer.json"))
    text = "".join([TEXTS[0], PLACEHOLDER, TEXTS[1], PLACEHOLDER, TEXTS[2]])
    rendered = f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"
    ids = tokenizer.encode(rendered, add_special_tokens=False).ids
    prepared = [prepare_image(image, PROCESSING) for image in IMAGES]
    expanded, images = expand_request(ids, prepared, IMAGE, PROCESSING.merge_size)
    assert any(s.start < 128 < s.stop for s in images.spans), "no image at the chunk boundary"
    ids_t = torch.tensor([expanded])
    with torch.no_grad():
        out = reference.generate(
            input_ids=ids_t,
            attention_mask=torch.ones_like(ids_t),
            mm_token_type_ids=(ids_t == IMAGE).int(),
            pixel_values=torch.from_numpy(np.concatenate([p.pixels for p in prepared])),
            image_grid_thw=torch.tensor([[p.grid.t, p.grid.h, p.grid.w] for p in prepared]),
            max_new_tokens=NUM_TOKENS,
            do_sample=False,
        )
    expected = out[0, len(expanded) :].tolist()
    if EOS in expected:
        expected = expected[: expected.index(EOS)]
    return bundle, expected, expanded, images, tokenizer
