"""Grammar token masks (structured outputs) applied to logits before sampling.

A constrained request's grammar matcher runs on the host (runtime/grammar.py) and writes,
for the position a frame samples, a bitmask of the tokens the grammar allows: 32 tokens per
int32 word, bit ``i % 32`` of word ``i // 32`` set when token ``i`` is allowed (xgrammar's
layout). The program reads it as a per-row sampling input: rows whose ``is_masked`` flag is
set get every disallowed logit set to -inf, the others are untouched. The unpacking is
elementwise over fixed shapes, so it is capture-safe; on CPU it is skipped when no row is
masked (sampling.runs_every_path).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ignition.model.sampling import runs_every_path

BITS_PER_WORD = 32


def mask_words(vocab_size: int) -> int:
    """int32 words of one row's bitmask over ``vocab_size`` tokens."""
    return (vocab_size + BITS_PER_WORD - 1) // BITS_PER_WORD


def allowed_tokens(token_mask: Tensor, vocab_size: int) -> Tensor:
    """[N, V] bool from the packed bitmask [N, words] int32."""
    ids = torch.arange(vocab_size, device=token_mask.device)
    words = token_mask.index_select(1, ids // BITS_PER_WORD)  # [N, V]
    shifts = (ids % BITS_PER_WORD).to(token_mask.dtype)
    return (torch.bitwise_right_shift(words, shifts[None, :]) & 1).bool()


def apply_token_mask(logits: Tensor, token_mask: Tensor | None, is_masked: Tensor | None) -> Tensor:
    """``logits`` [N, V] with the disallowed tokens of masked rows at -inf (fp32).

    ``token_mask`` [N, words] and ``is_masked`` [N] are None for a program without grammar
    inputs; the logits are then returned unchanged. A masked row whose grammar allows none
    of its remaining tokens has no finite distribution left and fails alone
    (sampling.INVALID_TOKEN).
    """
    if token_mask is None or is_masked is None or not runs_every_path(is_masked):
        return logits
    logits = logits.float()
    allowed = allowed_tokens(token_mask, logits.shape[-1])
    return logits.masked_fill(is_masked[:, None] & ~allowed, -torch.inf)
