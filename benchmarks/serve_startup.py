"""Serve start-up with a ~1 GB checkpoint: stat fingerprint vs full hash (a benchmark).

Writes a random Qwen3.8-Flash-Next (qwen4_exp) checkpoint of about 1 GB (fp32) to
``--checkpoint`` once, builds a small bundle over the embedded checkpoint, points its
manifest at the big one (hash and stamps recorded as ``ignition build`` records them), then
times ``load_bundle``: manifest, checkpoint verification, weight loading, tokenizer. Preparing
programs comes after and is the same either way.

    .venv/bin/python benchmarks/serve_startup.py [--checkpoint /tmp/ignition-1g] [--repeats 3]

Under an older ignition (``PYTHONPATH=<old checkout>``) the default row is that version's
start-up (it hashed every start). Numbers are with the checkpoint in the page cache; from
a cold disk the hash costs a second full read of the weights on top.
"""

from __future__ import annotations

import argparse
import inspect
import json
import shutil
import statistics
import time
from pathlib import Path

import torch

from ignition.compiler.build import DEFAULT_CHECKPOINT, build_bundle
from ignition.model.config import ModelConfig
from ignition.model.weights import write_random_checkpoint
from ignition.recipes import LoadOptions
from ignition.runtime.bundle import load_bundle

BIG = dict(
    vocab_size=32768,
    hidden_size=1024,
    num_hidden_layers=8,
    layer_types=("gdn", "gdn", "gdn", "qsa") * 2,
    num_attention_heads=8,
    num_key_value_heads=2,
    head_dim=128,
    rotary_dim=64,
    linear_num_heads=8,
    linear_key_head_dim=128,
    linear_value_head_dim=128,
    num_experts=8,
    num_experts_per_tok=2,
    moe_intermediate_size=1024,
    shared_expert_intermediate_size=1024,
    max_position_embeddings=8192,
    tie_word_embeddings=True,
    qsa_indexer={"num_heads": 4, "head_dim": 128, "budget": 256, "compress_ratio": 4},
)


def big_checkpoint(path: Path) -> Path:
    if not (path / "model.safetensors").exists():
        torch.manual_seed(0)
        write_random_checkpoint(path, ModelConfig.tiny_flash_next(**BIG), seed=0)
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copyfile(DEFAULT_CHECKPOINT / name, path / name)
    return path


def bundle_over(checkpoint: Path, out: Path) -> Path:
    options = LoadOptions(max_prefill_chunk=64, speculation="off", concurrency=1)
    build_bundle("qwen38", options, out_dir=out, device="cpu")
    manifest = json.loads((out / "manifest.json").read_text())
    from ignition.compiler.fingerprint import checkpoint_sha256, checkpoint_stamps

    manifest["checkpoint"] = {
        "path": str(checkpoint.resolve()),
        "sha256": checkpoint_sha256(checkpoint),
        "copied": False,
        "files": [s.to_json() for s in checkpoint_stamps(checkpoint)],
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, default=Path("/tmp/ignition-1g"))
    parser.add_argument("--bundle", type=Path, default=Path("/tmp/ignition-1g-bundle"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    checkpoint = big_checkpoint(args.checkpoint)
    size_gb = sum(f.stat().st_size for f in checkpoint.iterdir()) / 1e9
    bundle = args.bundle if (args.bundle / "manifest.json").exists() else None
    bundle = bundle or bundle_over(checkpoint, args.bundle)
    modes = {"default": {}}
    if "verify_weights" in inspect.signature(load_bundle).parameters:
        modes["--verify-weights"] = {"verify_weights": True}
    load_bundle(bundle, "cpu", **modes["default"])  # warm the page cache
    print(f"checkpoint {checkpoint}: {size_gb:.2f} GB")
    print("mode              | load_bundle s (median of repeats)")
    for name, kwargs in modes.items():
        times = []
        for _ in range(args.repeats):
            began = time.perf_counter()
            load_bundle(bundle, "cpu", **kwargs)
            times.append(time.perf_counter() - began)
        print(
            f"{name:<17} | {statistics.median(times):.2f}  ({', '.join(f'{t:.2f}' for t in times)})"
        )


if __name__ == "__main__":
    main()
