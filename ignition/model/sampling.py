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
    # Logits processing (see model.logits_processing) and min_p; neutral when omitted.
    presence_penalty: Tensor | None = None  # [R] fp32, 0 = none
    frequency_penalty: Tensor | None = None  # [R] fp32, 0 = none
    repetition_penalty: Tensor | None = None  # [R] fp32, 1 = none
    min_p: Tensor | None = None  # [R] fp32, 0 = none
    min_tokens: Tensor | None = None  # [R] int32, 0 = none

    def __post_init__(self) -> None:
        n, device = self.temperature.shape[0], self.temperature.device
        for name, value in _NEUTRAL.items():
            if getattr(self, name) is None:
                dtype = torch.int32 if name == "min_tokens" else torch.float32
                setattr(self, name, torch.full((n,), value, dtype=dtype, device=device))

    @classmethod
    def build(
        cls,
        temperature: Sequence[float],
        top_k: Sequence[int] | None = None,
        top_p: Sequence[float] | None = None,
        seed: Sequence[int] | None = None,
        device: torch.device | str = "cpu",
        **processing: Sequence[float],
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
            **{
                name: torch.tensor(
                    list(values),
                    dtype=torch.int32 if name == "min_tokens" else torch.float32,
                    device=device,
                )
                for name, values in processing.items()
            },
        )

    @classmethod
    def greedy(cls, num_rows: int, device: torch.device | str = "cpu") -> SamplingParams:
        return cls.build([0.0] * num_rows, device=device)

    def rows(self, index: Tensor) -> SamplingParams:
        return SamplingParams(
            self.temperature[index],
            self.top_k[index],
            self.top_p[index],
            self.seed[index],
            **{name: getattr(self, name)[index] for name in _NEUTRAL},
        )


_NEUTRAL = {
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "repetition_penalty": 1.0,
    "min_p": 0.0,
    "min_tokens": 0,
}


# The window of most likely tokens a filtered row is cut from without a full sort. A row
# whose kept prefix ends inside it (top_k <= 256, or a nucleus reached within 256 tokens)
# never needs the rest of its vocabulary ordered.
CANDIDATE_WINDOW = 256


def _keep_prefix(sorted_probs: Tensor, top_k: Tensor, top_p: Tensor) -> Tensor:
    """The smallest prefix of a descending row whose mass reaches top_p, at most top_k long
    (the best token always survives; top_p = 1 is no limit, not a cut where rounding lets
    the running mass reach 1 before the tail)."""
    rank = torch.arange(sorted_probs.shape[-1], device=sorted_probs.device)[None, :]
    mass_before = sorted_probs.cumsum(-1) - sorted_probs
    within_p = (mass_before < top_p[:, None]) | (top_p[:, None] >= 1.0) | (rank == 0)
    return (rank < top_k[:, None]) & within_p


def target_distribution(logits: Tensor, params: SamplingParams) -> Tensor:
    """The distribution a row samples from: [N, V] fp32; greedy rows are one-hot at argmax.

    ``min_p`` cuts first (tokens below ``min_p`` times the most likely one's probability),
    then top-k / top-p within what remains.

    Three exact paths, chosen per row with masks (no host reads, fixed shapes): greedy rows
    and rows without top-k / top-p are a plain argmax / softmax; a filtered row whose kept
    prefix ends inside the CANDIDATE_WINDOW most likely tokens is cut from a partial sort
    (``topk``); only the others read the full sort, whose input is a constant for every
    other row (the sort then costs almost nothing for them on CPU).
    """
    logits = logits.float()
    vocab = logits.shape[-1]
    is_greedy = params.temperature <= 0
    temperature = torch.where(is_greedy, 1.0, params.temperature)
    scaled = logits / temperature[:, None]
    full_probs = torch.softmax(scaled, dim=-1)
    # min_p (after temperature, as vLLM): drop tokens below min_p times the best probability.
    below = full_probs < params.min_p[:, None] * full_probs.amax(-1, keepdim=True)
    scaled = scaled.masked_fill(below, -torch.inf)
    full_probs = full_probs.masked_fill(below, 0.0)
    full_probs = full_probs / full_probs.sum(-1, keepdim=True)
    top_k = torch.where(params.top_k > 0, params.top_k.long(), vocab)
    is_filtered = ~is_greedy & ((top_k < vocab) | (params.top_p < 1.0))
    # The window holds one token more than it keeps, to tell whether the prefix ends inside.
    width = min(vocab, CANDIDATE_WINDOW + 1)
    window_logits, window_order = scaled.topk(width, dim=-1)
    window_keep = _keep_prefix(full_probs.gather(-1, window_order), top_k, params.top_p)
    fits = (width == vocab) | ~window_keep[:, -1]
    window = torch.zeros_like(scaled).scatter(
        -1, window_order, torch.softmax(window_logits.masked_fill(~window_keep, -torch.inf), -1)
    )
    needs_sort = is_filtered & ~fits
    sorted_logits, order = torch.where(needs_sort[:, None], scaled, 0.0).sort(
        dim=-1, descending=True
    )
    keep = _keep_prefix(full_probs.gather(-1, order), top_k, params.top_p)
    masked = torch.where(keep, sorted_logits, -torch.inf)
    cut = torch.zeros_like(scaled).scatter(-1, order, torch.softmax(masked, dim=-1))
    probs = torch.where(
        is_filtered[:, None], torch.where(needs_sort[:, None], cut, window), full_probs
    )
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


def _as_int32(x: Tensor) -> Tensor:
    """int64 tensors holding 32-bit values -> int32 with the same 32 bits."""
    x = x & _MASK32
    return torch.where(x >= 1 << 31, x - (1 << 32), x).to(torch.int32)


def _shr32(x: Tensor, bits: int) -> Tensor:
    """Logical right shift of int32 bit patterns (``>>`` on int32 is arithmetic)."""
    return (x >> bits) & ((1 << (32 - bits)) - 1)


_MUL1 = 0x7FEB352D
_MUL2 = 0x846CA68B - (1 << 32)  # the same 32 bits as a signed int32 constant


def _mix32_wide(x: Tensor) -> Tensor:
    """lowbias32 on int32 bit patterns: the same bits as :func:`_mix32` (int32 products
    wrap modulo 2^32), at a fraction of the int64 cost on the [N, vocab] noise."""
    x = x ^ _shr32(x, 16)
    x = x * _MUL1
    x = x ^ _shr32(x, 15)
    x = x * _MUL2
    return x ^ _shr32(x, 16)


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
    # Per-row terms in int64 ([N, 1]), the per-token mixing in int32 ([N, num]).
    index = torch.arange(num, device=seed.device, dtype=torch.int32)[None, :]
    h = _mix32_wide(index + _as_int32(_mix32(counter.long()[:, None] * 4 + stream)))
    h = _mix32_wide(h ^ _as_int32(_mix32(seed[:, None] & _MASK32)))
    h = _mix32_wide(h ^ _as_int32(_mix32((seed[:, None] >> 32) & _MASK32)))
    bits = 32 - _UNIFORM_BITS
    u = (_shr32(h, bits).float() + 0.5) * (1.0 / float(1 << _UNIFORM_BITS))
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
