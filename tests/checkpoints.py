"""A small random Qwen3.8-Flash-Next checkpoint with a real tokenizer, for build, runtime and
server tests: family ``qwen4_exp`` in its published layout, so a build without ``--recipe``
resolves to the ``qwen38`` recipe as a released checkpoint does."""

from __future__ import annotations

from pathlib import Path

from ignition.model.config import ModelConfig
from ignition.model.weights import write_random_checkpoint
from scripts.tiny.corpus import stdlib_corpus
from scripts.tiny.tokenizer import save_tokenizer, train_tokenizer

VOCAB_SIZE = 512


def write_tiny_checkpoint(
    path: Path, seed: int = 0, max_position_embeddings: int = 8192
) -> Path:
    """config.json + model.safetensors of a random tiny qwen4_exp model + a byte-level BPE
    tokenizer."""
    config = ModelConfig.tiny_flash_next(
        vocab_size=VOCAB_SIZE,
        max_position_embeddings=max_position_embeddings,
        # blocks of 16: a quarter of the block keys to score at the recipe's 4096-token
        # prompts (the CPU reference gathers every visible block key per query)
        qsa_indexer={"num_heads": 4, "head_dim": 16, "budget": 64, "compress_ratio": 16},
    )
    write_random_checkpoint(path, config, seed=seed)
    text = stdlib_corpus().train_text[:200_000]
    # no tag tokens: the random model's tests were written against these merges
    save_tokenizer(train_tokenizer(text, vocab_size=VOCAB_SIZE, tags=False), path)
    return path
