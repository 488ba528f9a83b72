"""A tiny model whose vocabulary a real tokenizer spells, for structured-output tests.

The grammar matcher needs token strings, so these tests pair the shared tiny random model
(``tiny.py``) with the byte-level BPE tokenizer the server tests' checkpoint uses, and pad
the model's vocabulary past the tokenizer's ids as released checkpoints do: the padding
ids must never be allowed.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence

import jsonschema_rs
import torch
from tokenizers import Tokenizer

from ignition.model.config import ModelConfig
from ignition.model.weights import random_model
from ignition.runtime.grammar import GrammarCompiler
from scripts.tiny.corpus import stdlib_corpus
from scripts.tiny.tokenizer import train_tokenizer
from tests.checkpoints import VOCAB_SIZE
from tests.runtime.tiny import EOS

MODEL_VOCAB = VOCAB_SIZE + 32  # padded past the tokenizer's ids
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 6},
        "color": {"enum": ["red", "green", "blue"]},
        "count": {"type": "integer", "minimum": 0, "maximum": 99},
    },
    "required": ["name", "color", "count"],
    "additionalProperties": False,
}
REGEX = r"[a-z]{2,5}-[0-9]{1,3}"
CHOICES = ["yes", "no", "maybe"]


@functools.cache
def tokenizer() -> Tokenizer:
    text = stdlib_corpus().train_text[:200_000]
    return train_tokenizer(text, vocab_size=VOCAB_SIZE, tags=False)


@functools.cache
def compiler() -> GrammarCompiler:
    return GrammarCompiler(tokenizer(), MODEL_VOCAB, [EOS])


def structured_model(seed: int = 3):
    torch.manual_seed(0)
    return random_model(ModelConfig.tiny(vocab_size=MODEL_VOCAB), seed=seed)


class TokenizerDecoder:
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return tokenizer().decode(list(ids), skip_special_tokens=skip_special_tokens)


def valid_against_schema(text: str) -> bool:
    """Whether ``text`` is JSON that SCHEMA accepts."""
    return jsonschema_rs.validator_for(SCHEMA).is_valid(json.loads(text))
