"""Sampling: temperature, top-k, top-p and per-request seeds, with no generator state.

Draws are a counter-based hash of (seed, stream, position, index), so the same seed gives the
same tokens whatever the batch, packing or replay order (docs/model.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

import torch
from torch import Tensor

_MASK32 = 0xFFFFFFFF
# Emitted by a row whose distribution is not finite; the worker fails that request alone.
INVALID_TOKEN = -2


class RandomStream(IntEnum):
    """Independent random streams of one request position."""

    SAMPLE = 1  # ordinary target sampling
    DRAFT = 2  # MTP proposal sampling
    ACCEPT = 3  # acceptance uniforms
    RESAMPLE = 4  # resample / bonus noise


@dataclass
class SamplingTensors:
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
    # Grammar bitmask per row for the position it samples (model.grammar_mask); None: none.
    token_mask: Tensor | None = None  # [R, ceil(V / 32)] int32
    is_masked: Tensor | None = None  # [R] bool

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
    ) -> SamplingTensors:
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
    def greedy(cls, num_rows: int, device: torch.device | str = "cpu") -> SamplingTensors:
        return cls.build([0.0] * num_rows, device=device)

    def rows(self, index: Tensor) -> SamplingTensors:
        return SamplingTensors(
            self.temperature[index],
            self.top_k[index],
            self.top_p[index],
            self.seed[index],
            **{name: getattr(self, name)[index] for name in _NEUTRAL},
            token_mask=None if self.token_mask is None else self.token_mask[index],
            is_masked=None if self.is_masked is None else self.is_masked[index],
        )


_NEUTRAL = {
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "repetition_penalty": 1.0,
    "min_p": 0.0,
    "min_tokens": 0,
}


# Most likely tokens a filtered row is cut from by partial sort before any full sort.
CANDIDATE_WINDOW = 256
# CPU only: wider partial-sort windows tried before a full sort.
WIDER_WINDOWS = (4096,)


# CPU: skip per-row paths no row takes; False runs every path as a GPU does (tests compare).
SKIP_UNUSED_PATHS = True


def skips_paths(t: Tensor) -> bool:
    """Whether work on ``t``'s device may branch on data: eager CPU programs may."""
    return SKIP_UNUSED_PATHS and t.device.type == "cpu"


def runs_every_path(mask: Tensor) -> bool:
    """Whether a per-row path must run although ``mask`` may select no row (always on GPU:
    a graph cannot branch on data; on CPU a skipped path changes no value)."""
    return not skips_paths(mask) or bool(mask.any())


def _keep_prefix(sorted_probs: Tensor, top_k: Tensor, top_p: Tensor) -> Tensor:
    """Length of the smallest prefix of a descending row whose mass reaches top_p, at most
    top_k (the best token always survives; top_p = 1 is no limit)."""
    rank = torch.arange(sorted_probs.shape[-1], device=sorted_probs.device)[None, :]
    mass_before = sorted_probs.cumsum(-1) - sorted_probs
    within_p = (mass_before < top_p[:, None]) | (top_p[:, None] >= 1.0) | (rank == 0)
    return (rank < top_k[:, None]) & within_p


def _window_cut(
    scaled: Tensor, full_probs: Tensor, top_k: Tensor, top_p: Tensor, width: int
) -> tuple[Tensor, Tensor]:
    """(cut distribution [N, V] within the ``width`` most likely tokens, whether it fits [N])."""
    vocab = scaled.shape[-1]
    width = min(vocab, width + 1)  # one token more than it keeps: does the prefix end inside?
    window_logits, window_order = scaled.topk(width, dim=-1)
    keep = _keep_prefix(full_probs.gather(-1, window_order), top_k, top_p)
    fits = (width == vocab) | ~keep[:, -1]
    cut = torch.zeros_like(scaled).scatter(
        -1, window_order, torch.softmax(window_logits.masked_fill(~keep, -torch.inf), -1)
    )
    return cut, fits


def _sorted_cut(scaled: Tensor, full_probs: Tensor, top_k: Tensor, top_p: Tensor) -> Tensor:
    """The cut distribution [N, V] from a full sort of every row."""
    sorted_logits, order = scaled.sort(dim=-1, descending=True)
    keep = _keep_prefix(full_probs.gather(-1, order), top_k, top_p)
    masked = torch.where(keep, sorted_logits, -torch.inf)
    return torch.zeros_like(scaled).scatter(-1, order, torch.softmax(masked, dim=-1))


def _wide_cut(
    scaled: Tensor, full_probs: Tensor, top_k: Tensor, top_p: Tensor, rows: Tensor
) -> Tensor:
    """CPU only: ``rows`` cut from a wider window, else a full sort of those rows."""
    cut = torch.zeros_like(scaled)
    pending = rows.nonzero().squeeze(-1)
    for width in WIDER_WINDOWS:
        if pending.numel() == 0 or width + 1 >= scaled.shape[-1]:
            break
        part, fits = _window_cut(
            scaled[pending], full_probs[pending], top_k[pending], top_p[pending], width
        )
        cut[pending[fits]] = part[fits]
        pending = pending[~fits]
    if pending.numel():
        cut[pending] = _sorted_cut(
            scaled[pending], full_probs[pending], top_k[pending], top_p[pending]
        )
    return cut


def target_distribution(logits: Tensor, params: SamplingTensors) -> Tensor:
    """The distribution a row samples from: [N, V] fp32; greedy rows are one-hot at argmax.
    ``min_p`` cuts first, then top-k / top-p; no host reads."""
    logits = logits.float()
    vocab = logits.shape[-1]
    is_greedy = params.temperature <= 0
    # scatter, not F.one_hot: on CPU one_hot reads the indices' range on the host.
    one_hot = None
    if runs_every_path(is_greedy):
        one_hot = torch.zeros_like(logits).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
        # argmax ranks NaN first: a greedy row with NaN logits has no answer either.
        one_hot = torch.where(logits.isnan().any(-1, keepdim=True), torch.nan, one_hot)
        if not runs_every_path(~is_greedy):
            return one_hot
    temperature = torch.where(is_greedy, 1.0, params.temperature)
    scaled = logits / temperature[:, None]
    full_probs = torch.softmax(scaled, dim=-1)
    # min_p (after temperature, as vLLM): drop tokens below min_p times the best probability.
    if runs_every_path(params.min_p > 0):
        below = full_probs < params.min_p[:, None] * full_probs.amax(-1, keepdim=True)
        scaled = scaled.masked_fill(below, -torch.inf)
        full_probs = full_probs.masked_fill(below, 0.0)
    full_probs = full_probs / full_probs.sum(-1, keepdim=True)
    top_k = torch.where(params.top_k > 0, params.top_k.long(), vocab)
    is_filtered = ~is_greedy & ((top_k < vocab) | (params.top_p < 1.0))
    probs = full_probs
    if runs_every_path(is_filtered):
        window, fits = _window_cut(scaled, full_probs, top_k, params.top_p, CANDIDATE_WINDOW)
        needs_sort = is_filtered & ~fits
        cut = window
        if not skips_paths(scaled):
            constant = torch.where(needs_sort[:, None], scaled, 0.0)
            cut = torch.where(
                needs_sort[:, None], _sorted_cut(constant, full_probs, top_k, params.top_p), window
            )
        elif needs_sort.any():
            wide = _wide_cut(scaled, full_probs, top_k, params.top_p, needs_sort)
            cut = torch.where(needs_sort[:, None], wide, window)
        probs = torch.where(is_filtered[:, None], cut, full_probs)
    if one_hot is not None:
        probs = torch.where(is_greedy[:, None], one_hot, probs)
    return probs


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


_MUL1 = 0x7FEB352D
_MUL2 = 0x846CA68B - (1 << 32)  # the same 32 bits as a signed int32 constant


def _mix32_wide_(x: Tensor, scratch: Tensor) -> Tensor:
    """lowbias32 on int32 bit patterns, in place: the same bits as :func:`_mix32`, cheaper."""
    for bits, multiplier in ((16, _MUL1), (15, _MUL2), (16, None)):
        torch.bitwise_right_shift(x, bits, out=scratch)
        scratch.bitwise_and_((1 << (32 - bits)) - 1)  # logical, not arithmetic, shift
        x.bitwise_xor_(scratch)
        if multiplier is not None:
            x.mul_(multiplier)
    return x


_UNIFORM_BITS = 23  # fp32 holds (m + 0.5) / 2^23 exactly for every 23-bit m


def seeded_uniform(
    seed: Tensor, stream: int, counter: Tensor, num: int, dtype: torch.dtype = torch.float32
) -> Tensor:
    """[N, num] uniforms strictly inside (0, 1) in ``dtype``, from seed [N], a stream id and
    counter [N] (a position); never 1.0, so -log(u) is never -0."""
    # Per-row terms in int64 ([N, 1]), the per-token mixing in int32 ([N, num]).
    index = torch.arange(num, device=seed.device, dtype=torch.int32)[None, :]
    h = index + _as_int32(_mix32(counter.long()[:, None] * 4 + stream))
    scratch = torch.empty_like(h)
    _mix32_wide_(h, scratch).bitwise_xor_(_as_int32(_mix32(seed[:, None] & _MASK32)))
    _mix32_wide_(h, scratch).bitwise_xor_(_as_int32(_mix32((seed[:, None] >> 32) & _MASK32)))
    _mix32_wide_(h, scratch)
    bits = 32 - _UNIFORM_BITS
    torch.bitwise_right_shift(h, bits, out=scratch).bitwise_and_((1 << _UNIFORM_BITS) - 1)
    u = scratch.float().add_(0.5).mul_(1.0 / float(1 << _UNIFORM_BITS))
    if dtype == torch.float32 or dtype == torch.float64:
        return u.to(dtype)
    info = torch.finfo(dtype)
    return u.to(dtype).clamp(min=info.tiny, max=1.0 - info.eps / 2)


def exponential_noise(seed: Tensor, stream: int, counter: Tensor, vocab: int) -> Tensor:
    """[N, vocab] Exponential(1) draws for the exponential race."""
    return seeded_uniform(seed, stream, counter, vocab).log_().neg_()


def finite_rows(probs: Tensor) -> Tensor:
    """[N] whether each row of ``probs`` [N, V] is finite with some mass left."""
    return torch.isfinite(probs).all(-1) & (probs.sum(-1) > 0)


def sample_from(probs: Tensor, noise: Tensor) -> Tensor:
    """argmax(p / E): a draw from p (exact argmax for one-hot rows). Returns [N] int64."""
    return (probs / noise).argmax(-1)


def sample(
    logits: Tensor, params: SamplingTensors, positions: Tensor, stream: int = RandomStream.SAMPLE
) -> Tensor:
    """Sample one token per row; ``positions`` [N] is the position of the token sampled.
    A row whose distribution is not finite emits :data:`INVALID_TOKEN`."""
    if skips_paths(logits) and not runs_every_path(params.temperature > 0):
        # All greedy on CPU: a one-hot row's race is its argmax, so skip the noise.
        tokens = logits.argmax(-1)
        return torch.where(logits.isnan().any(-1), INVALID_TOKEN, tokens)
    probs = target_distribution(logits, params)
    noise = exponential_noise(params.seed, stream, positions, logits.shape[-1])
    is_valid = finite_rows(probs)
    tokens = torch.div(probs, noise, out=noise).argmax(-1)  # sample_from, in place
    return torch.where(is_valid, tokens, INVALID_TOKEN)
