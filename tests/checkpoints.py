"""A small random checkpoint with a real tokenizer, for build/runtime/server tests."""

from __future__ import annotations

from pathlib import Path

from ignition.model.config import Qwen38Config
from ignition.model.weights import write_random_checkpoint
from scripts.tiny.corpus import stdlib_corpus
from scripts.tiny.tokenizer import save_tokenizer, train_tokenizer

VOCAB_SIZE = 512


def write_test_checkpoint(path: Path, seed: int = 0) -> Path:
    """config.json + model.safetensors of a random tiny model + a byte-level BPE tokenizer."""
    config = Qwen38Config.tiny(vocab_size=VOCAB_SIZE, max_position_embeddings=8192)
    write_random_checkpoint(path, config, seed=seed)
    text = stdlib_corpus().train_text[:200_000]
    # no tag tokens: the random model's tests were written against these merges
    save_tokenizer(train_tokenizer(text, vocab_size=VOCAB_SIZE, tags=False), path)
    return path
