"""Bundle loading details that the build tests do not reach."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from tokenizers import Tokenizer, models

from ignition.runtime.bundle import _eos_ids


def tokenizer_with(vocab: dict[str, int]) -> Tokenizer:
    return Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))


@pytest.mark.parametrize(
    ("configured", "expected"), [(2, (2, 7)), ([2, 0], (0, 2, 7)), (None, (7,))]
)
def test_end_of_sequence_ids_come_from_config_and_tokenizer(configured, expected):
    model = SimpleNamespace(config=SimpleNamespace(eos_token_id=configured))
    tokenizer = tokenizer_with({"<unk>": 1, "<|im_end|>": 7})
    assert _eos_ids(tokenizer, {"eos_token": "<|im_end|>"}, model) == expected
