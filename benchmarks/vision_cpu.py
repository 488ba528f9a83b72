"""The vision tower on CPU: eager (per-image attention) vs the packed program path (a benchmark).

Times one image through the tower at a Qwen3.5-0.8B-like vision shape (width 768, 12
blocks, 12 heads, patch 16; the published configs have more blocks) for a few patch
counts, eager ``forward`` against ``forward_packed`` at the matching vision-program
capacity, and preprocessing of a decoded image with Pillow and numpy. Prints numbers;
asserts nothing about speed.

    .venv/bin/python benchmarks/vision_cpu.py [--depth 12] [--repeats 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from PIL import Image

from ignition.model.config_vision import VisionConfig
from ignition.model.vision.encoder import VisionEncoder
from ignition.model.vision.grid import ImageGrid
from ignition.model.vision.preprocess import ImageProcessing, prepare_image


def best_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        times.append((time.perf_counter() - began) * 1e3)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--depth", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = VisionConfig(
        hidden_size=768,
        num_hidden_layers=args.depth,
        num_attention_heads=12,
        patch_size=16,
        intermediate_size=3072,
        out_hidden_size=1024,
    )
    encoder = VisionEncoder(config).eval()
    dim = 3 * 2 * 16 * 16
    print(f"tower: width 768, {args.depth} blocks, 12 heads, patch 16; {args.threads} threads")
    print(f"{'patches':>8} {'eager ms':>10} {'packed ms':>10} {'features':>9}")
    for side in (16, 32):
        grid = ImageGrid(1, side, side)
        pixels = torch.randn(grid.num_patches, dim)
        batch = encoder.metadata([grid], grid.num_patches)
        with torch.no_grad():
            eager = best_ms(lambda p=pixels, g=grid: encoder(p, [g]), args.repeats)
            packed = best_ms(lambda p=pixels, b=batch: encoder.forward_packed(p, b), args.repeats)
        print(f"{grid.num_patches:>8} {eager:>10.1f} {packed:>10.1f} {grid.num_features(2):>9}")
    settings = ImageProcessing()
    image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (768, 1024, 3), np.uint8))
    prep = best_ms(lambda: prepare_image(image, settings), args.repeats)
    prepared = prepare_image(image, settings)
    print(
        f"preprocess 1024x768 -> grid {prepared.grid.h}x{prepared.grid.w} "
        f"({prepared.grid.num_patches} patches): {prep:.1f} ms"
    )


if __name__ == "__main__":
    main()
