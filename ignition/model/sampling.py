"""Sampling: temperature, top-k, top-p and per-request seeds, with no generator state.

Random numbers are a counter-based hash of (seed, stream, position, index), computed with
integer tensor ops on the device. A request's draws therefore depend only on its seed and the
position being sampled, not on batch composition, packing or graph replay order, so the same
seed gives the same tokens. Sampling itself is the exponential race: argmax(p / E) with
E ~ Exponential(1) draws token i with probability p_i, the same rule the rejection kernel
uses for its resample/bonus token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

import torch
from torch import Tensor

_MASK32 = 0xFFFFFFFF


class RandomStream(IntEnum):
    """Independent random streams of one request position."""

    SAMPLE = 1  # ordinary target sampling
    DRAFT = 2  # MTP proposal sampling
    ACCEPT = 3  # acceptance uniforms
    RESAMPLE = 4  # resample / bonus noise


@dataclass
class SamplingParams:
    """Per-row sampling parameters as device tensors (rows of one program)."""

    temperature: Tensor  # [R] fp32, 0 = greedy
    top_k: Tensor  # [R] int32, 0 = no limit
    top_p: Tensor  # [R] fp32, 1 = no limit
    seed: Tensor  # [R] int64

    @classmethod
    def build(
        cls,
        temperature: Sequence[float],
        top_k: Sequence[int] | None = None,
        top_p: Sequence[float] | None = None,
        seed: Sequence[int] | None = None,
        device: torch.device | str = "cpu",
    ) -> SamplingParams:
        n = len(temperature)
        for name, values in (("top_k", top_k), ("top_p", top_p), ("seed", seed)):
            if values is not None and len(values) != n:
                raise ValueError(f"{name} has {len(values)} entries for {n} rows")
        if any(t < 0 for t in temperature):
            raise ValueError(f"temperature must be >= 0, got {list(temperature)}")
        if top_p is not None and any(not 0 < p <= 1 for p in top_p):
            raise ValueError(f"top_p must lie in (0, 1], got {list(top_p)}")
        if top_k is not None and any(k < 0 for k in top_k):
            raise ValueError(f"top_k must be >= 0, got {list(top_k)}")
        return cls(
            temperature=torch.tensor(list(temperature), dtype=torch.float32, device=device),
            top_k=torch.tensor(list(top_k or [0] * n), dtype=torch.int32, device=device),
            top_p=torch.tensor(list(top_p or [1.0] * n), dtype=torch.float32, device=device),
            seed=torch.tensor(list(seed or [0] * n), dtype=torch.int64, device=device),
        )

    @classmethod
    def greedy(cls, num_rows: int, device: torch.device | str = "cpu") -> SamplingParams:
        return cls.build([0.0] * num_rows, device=device)

    def rows(self, index: Tensor) -> SamplingParams:
        return SamplingParams(
            self.temperature[index], self.top_k[index], self.top_p[index], self.seed[index]
        )


def target_distribution(logits: Tensor, params: SamplingParams) -> Tensor:
    """The distribution a row samples from: [N, V] fp32; greedy rows are one-hot at argmax."""
    logits = logits.float()
    vocab = logits.shape[-1]
    is_greedy = params.temperature <= 0
    temperature = torch.where(is_greedy, 1.0, params.temperature)
    scaled = logits / temperature[:, None]
    sorted_logits, order = scaled.sort(dim=-1, descending=True)
    rank = torch.arange(vocab, device=logits.device)[None, :]
    top_k = torch.where(params.top_k > 0, params.top_k.long(), vocab)
    sorted_probs = torch.softmax(sorted_logits, dim=-1)
    mass_before = sorted_probs.cumsum(-1) - sorted_probs
    # Keep the smallest prefix whose mass reaches top_p (the best token always survives).
    keep = (rank < top_k[:, None]) & ((mass_before < params.top_p[:, None]) | (rank == 0))
    masked = torch.where(keep, sorted_logits, -torch.inf)
    probs = torch.zeros_like(scaled).scatter(-1, order, torch.softmax(masked, dim=-1))
    # scatter, not F.one_hot: on CPU one_hot reads the indices' range on the host.
    one_hot = torch.zeros_like(scaled).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
    return torch.where(is_greedy[:, None], one_hot, probs)


def _mix32(x: Tensor) -> Tensor:
    """A 32-bit integer finaliser (lowbias32) on int64 tensors holding 32-bit values."""
    x = x & _MASK32
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & _MASK32
    x = x ^ (x >> 15)
    x = (x * 0x846CA68B) & _MASK32
    return x ^ (x >> 16)


_UNIFORM_BITS = 23  # fp32 holds (m + 0.5) / 2^23 exactly for every 23-bit m


def seeded_uniform(
    seed: Tensor, stream: int, counter: Tensor, num: int, dtype: torch.dtype = torch.float32
) -> Tensor:
    """[N, num] uniforms strictly inside (0, 1) in ``dtype``, from seed [N], a stream id and
    counter [N] (a position).

    The 23 top hash bits m give (m + 0.5) / 2^23, exact in fp32: the largest value is
    1 - 2^-24, never 1.0 (24 bits rounded 2^24 - 0.5 up to 2^24, so -log(u) became -0 and
    p / E turned a zero-probability token into NaN, the argmax winner). Narrower dtypes are
    clamped to their own largest value below one and smallest positive normal.
    """
    index = torch.arange(num, device=seed.device, dtype=torch.int64)[None, :]
    h = _mix32(index + _mix32(counter.long()[:, None] * 4 + stream))
    h = _mix32(h ^ _mix32(seed[:, None] & _MASK32))
    h = _mix32(h ^ _mix32((seed[:, None] >> 32) & _MASK32))
    bits = 32 - _UNIFORM_BITS
    u = ((h >> bits).float() + 0.5) * (1.0 / float(1 << _UNIFORM_BITS))
    if dtype == torch.float32 or dtype == torch.float64:
        return u.to(dtype)
    info = torch.finfo(dtype)
    return u.to(dtype).clamp(min=info.tiny, max=1.0 - info.eps / 2)


def exponential_noise(seed: Tensor, stream: int, counter: Tensor, vocab: int) -> Tensor:
    """[N, vocab] Exponential(1) draws for the exponential race."""
    return -torch.log(seeded_uniform(seed, stream, counter, vocab))


def sample_from(probs: Tensor, noise: Tensor) -> Tensor:
    """argmax(p / E): a draw from p (exact argmax for one-hot rows). Returns [N] int64."""
    return (probs / noise).argmax(-1)


def sample(
    logits: Tensor, params: SamplingParams, positions: Tensor, stream: int = RandomStream.SAMPLE
) -> Tensor:
    """Sample one token per row; ``positions`` [N] is the position of the token sampled."""
    probs = target_distribution(logits, params)
    noise = exponential_noise(params.seed, stream, positions, logits.shape[-1])
    return sample_from(probs, noise)
