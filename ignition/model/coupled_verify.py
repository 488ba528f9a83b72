"""Coupled verification: draft and target share each position's sampling noise, so
speculation never changes a request's tokens (docs/model.md)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch
from torch import Tensor

from ignition.kernels.rejection_verify.reference import draft_ratios
from ignition.model.sampling import RandomStream, exponential_noise

VERIFICATION_MODES = ("coupled", "rejection")

_scoped_mode: ContextVar[str] = ContextVar("ignition_verification", default="coupled")


@contextmanager
def use_verification(mode: str) -> Iterator[None]:
    """Verify speculative rounds inside the block with ``mode`` (``coupled``/``rejection``)."""
    if mode not in VERIFICATION_MODES:
        raise ValueError(f"unknown verification mode {mode!r}; expected {VERIFICATION_MODES}")
    token = _scoped_mode.set(mode)
    try:
        yield
    finally:
        _scoped_mode.reset(token)


def verification_mode() -> str:
    return _scoped_mode.get()


def draft_stream() -> int:
    """The random stream drafts are sampled from: the target's own under coupling."""
    return RandomStream.SAMPLE if verification_mode() == "coupled" else RandomStream.DRAFT


def position_samples(target_probs: Tensor, seed: Tensor, start_pos: Tensor) -> Tensor:
    """[R, W] the token ordinary sampling emits at each verified position of target_probs
    [R, W, V] (position j of row r samples position start_pos[r] + j + 1)."""
    num_rows, width, vocab = target_probs.shape
    offsets = torch.arange(1, width + 1, device=start_pos.device)
    positions = (start_pos.long()[:, None] + offsets[None, :]).reshape(-1)
    noise = exponential_noise(seed.repeat_interleave(width), RandomStream.SAMPLE, positions, vocab)
    flat = target_probs.reshape(-1, vocab).float()
    return torch.div(flat, noise, out=noise).argmax(-1).reshape(num_rows, width)


def coupled_verify(
    draft_tokens: Tensor,
    draft_probs: Tensor,
    target_probs: Tensor,
    target_tokens: Tensor,
    query_lens: Tensor,
) -> tuple[Tensor, Tensor, Tensor]:
    """Accept drafts while they equal the target's own samples; shapes as
    ``ops.rejection_verify``, plus target_tokens [R, W]."""
    num_rows, depth = draft_tokens.shape
    width = target_probs.shape[1]
    device = target_probs.device
    num_verified = min(depth, width - 1)
    qlen = query_lens.to(device=device, dtype=torch.int64)
    offered, ratio = draft_ratios(draft_tokens, draft_probs, target_probs, query_lens)
    survival = torch.where(offered, ratio, 0.0).cumprod(dim=1)

    accepts = torch.zeros(num_rows, depth, dtype=torch.bool, device=device)
    accepts[:, :num_verified] = draft_tokens[:, :num_verified] == target_tokens[:, :num_verified]
    accepts &= offered
    num_accepted = accepts.int().cumprod(dim=1).sum(dim=1)  # [R]

    column = torch.arange(width, device=device)[None, :]
    drafts = torch.full((num_rows, width), -1, dtype=torch.int64, device=device)
    drafts[:, :num_verified] = draft_tokens[:, :num_verified]
    output = torch.where(column < num_accepted[:, None], drafts, -1)
    output = torch.where(column == num_accepted[:, None], target_tokens.long(), output)
    output = torch.where((qlen > 0)[:, None], output, -1)
    return num_accepted.to(torch.int32), output, survival
