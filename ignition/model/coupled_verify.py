"""Coupled verification: speculation that never changes a request's tokens.

Ordinary sampling draws the token at position n as the exponential race argmax(p / E_n),
where E_n ~ Exp(1) per vocabulary entry comes from the request's seed and n alone
(:mod:`ignition.model.sampling`). Rejection verification (``ops.rejection_verify``) also
preserves the target *distribution*, but its tokens depend on which drafts were offered:
the acceptance uniforms and the residual draw use other noise, so five identical seeded
requests gave five different outputs once Helios chose different widths for them.

Coupling gives every position one noise. The draft at position n is argmax(q / E_n), the
target's token there is argmax(p / E_n), and a draft is accepted exactly when the two agree;
the first disagreement emits the target's token. Every emitted token is therefore the one
ordinary sampling emits at that position, whatever width was verified (and greedy rows,
whose p is one-hot, keep argmax acceptance). The price: two races sharing their noise agree
with probability at least (1 - TV) / (1 + TV) instead of rejection sampling's 1 - TV
(TV = total variation between p and q); benchmarks/coupled_acceptance.py measures it.

The mode is chosen when a program runs, so a CUDA graph keeps the mode it was captured with.
"""

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
    """[R, W] the token ordinary sampling emits at each verified position: position j of
    row r samples the token at start_pos[r] + j + 1 from target_probs[r, j] ([R, W, V])."""
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
    """Accept each row's drafts while they equal the target's own samples.

    Shapes and returns as ``ops.rejection_verify`` (draft_tokens [R, D], draft_probs
    [R, D, V], target_probs [R, W, V], query_lens [R]; num_accepted [R] int32, output_tokens
    [R, W] int64, survival [R, D]), plus target_tokens [R, W] from :func:`position_samples`.
    ``survival`` keeps rejection sampling's forecast, the cumulative min(1, p(x) / q(x)):
    Helios learns the realised acceptance from the records either way.
    """
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
