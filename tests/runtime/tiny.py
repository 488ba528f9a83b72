"""The tiny random model, catalog and decoder the runtime tests share.

Every end-to-end runtime test drives the real engine over the same tiny random hybrid
(``ModelConfig.tiny``: Qwen3.5-MoE's shape with its MTP head; seed 3 unless a test needs
another) and the qwen38 catalog with mixed programs; keeping them here means a test says only
what it varies (the prefill chunk, the seed). The Qwen3.8-Flash-Next parts (streams, PLE,
the indexer) have their own runtime tests over qwen4_exp checkpoints. The pytest fixtures
over these live in ``conftest.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ignition.components.capacity import plan_catalog
from ignition.components.catalog import Catalog
from ignition.model.config import ModelConfig
from ignition.model.weights import random_model
from ignition.recipes import LoadOptions, get_recipe

EOS = 2


class CharDecoder:
    """One CJK character per token id, so detokenized text maps back to ids exactly."""

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(0x4E00 + i) for i in ids if not (skip_special_tokens and i == EOS))


def tiny_model(seed: int = 3):
    torch.manual_seed(0)
    return random_model(ModelConfig.tiny(), seed=seed)


def tiny_catalog(max_prefill_chunk: int = 256) -> Catalog:
    return plan_catalog(
        get_recipe("qwen38"), LoadOptions(mixed_prefill=True, max_prefill_chunk=max_prefill_chunk)
    )
