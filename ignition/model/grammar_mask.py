"""Grammar token masks applied to logits before sampling: bit ``i % 32`` of int32 word
``i // 32`` allows token i (xgrammar's layout); masked rows' other logits become -inf."""

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
    """``logits`` [N, V] with masked rows' disallowed tokens at -inf (fp32); unchanged when
    ``token_mask`` [N, words] / ``is_masked`` [N] are None. A row allowing nothing fails alone."""
    if token_mask is None or is_masked is None or not runs_every_path(is_masked):
        return logits
    logits = logits.float()
    allowed = allowed_tokens(token_mask, logits.shape[-1])
    return logits.masked_fill(is_masked[:, None] & ~allowed, -torch.inf)
