"""Service prices: the normalizers a measured catalog implies and the prices a request's
aged rates (``state/rates.py``) imply. See docs/utility.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios.config import PolicyConfig
from ignition.helios.state.rates import Normalizers, ServiceRates

RATE_FLOOR_FRACTION = 1e-9
GENERATION_KINDS = (GraphKind.DECODE, GraphKind.SPECULATIVE, GraphKind.MIXED)


@dataclass(slots=True)
class Prices:
    prefill_token: float
    output_token: float
    delivery: float

    @property
    def largest(self) -> float:
        return max(self.prefill_token, self.output_token, self.delivery)


def reference_interval_ms(
    measured: Iterable[tuple[Descriptor, float]], num_streams: int, family_size: int | None = None
) -> float | None:
    """sigma = K * T / min(B, k) for the measured generation graph minimizing T / min(B, k)."""
    k = num_streams if family_size is None else family_size
    if num_streams <= 0 or k <= 0:
        return None
    best: float | None = None
    for d, t_ms in measured:
        if d.kind not in GENERATION_KINDS or t_ms <= 0:
            continue
        per_stream = t_ms / min(d.batch_capacity, k)
        if best is None or per_stream < best:
            best = per_stream
    return None if best is None else num_streams * best


def useful_tokens(d: Descriptor, rows: int) -> int:
    if d.kind is GraphKind.PREFILL:
        return rows * d.token_capacity
    if d.kind is GraphKind.MIXED:
        return d.prefill_capacity + (rows - 1)
    if d.kind in GENERATION_KINDS:
        return rows
    return 0


def graph_shares(
    measured: Iterable[tuple[Descriptor, float]], num_streams: int
) -> list[tuple[float, float]]:
    """(useful tokens per stream, duration ms) of every measured graph at k streams,
    counted as ``token_normalizer`` counts them (the input of ``prompt_starts``)."""
    k = max(1, num_streams)
    out = []
    for d, t_ms in measured:
        if t_ms > 0:
            useful = useful_tokens(d, min(d.batch_capacity, k))
            if useful > 0:
                out.append((useful / k, t_ms))
    return out


def token_normalizer(
    measured: Iterable[tuple[Descriptor, float]], num_streams: int
) -> float | None:
    """The highest per-stream token rate one measured graph offers K streams."""
    k = max(1, num_streams)
    best: float | None = None
    for d, t_ms in measured:
        if t_ms <= 0:
            continue
        rows = min(d.batch_capacity, k)
        rate = useful_tokens(d, rows) / (k * t_ms)
        if rate > 0 and (best is None or rate > best):
            best = rate
    return best


def normalizers(
    measured: list[tuple[Descriptor, float]],
    num_token_streams: int,
    num_delivery_streams: int,
    families: Mapping[str, int] | None = None,
) -> Normalizers:
    """``families`` maps each family of delivery-bearing streams to its size."""
    total = max(1, num_delivery_streams)
    token_rate = token_normalizer(measured, num_token_streams)
    sigma = reference_interval_ms(measured, total)
    by_family: dict[str, Normalizers] = {}
    if families is not None and len(families) > 1:
        for family, size in families.items():
            s = reference_interval_ms(measured, total, size)
            by_family[family] = Normalizers(token_rate, None if s is None else 1.0 / s, s)
    return Normalizers(
        token_rate=token_rate,
        delivery_rate=None if sigma is None else 1.0 / sigma,
        sigma_ms=sigma,
        by_family=by_family,
    )


def _fairness(coefficient: float, rate: float | None, normal: float | None) -> float:
    """coefficient / rate with the rate floored; unknown rate and normalizer price zero."""
    if coefficient == 0:
        return 0.0
    if rate is None:
        if normal is None:
            return 0.0
        rate = normal
    floor = RATE_FLOOR_FRACTION * (normal if normal is not None else 1.0)
    return coefficient / max(rate, floor)


def first_delivery_price(norms: Normalizers, policy: PolicyConfig) -> float:
    """A prompt row's delivery price: the chunk that finishes its prompt makes the
    request's first delivery, credited (``PolicyConfig.first_delivery``) at the price a
    decoder without delivery history starts at, g / z at the delivery normalizer."""
    if policy.first_delivery == 0:
        return 0.0
    return policy.first_delivery * _fairness(policy.delivery_fairness, None, norms.delivery_rate)


def prices(
    rates: ServiceRates,
    norms: Normalizers,
    policy: PolicyConfig,
    is_decoder: bool,
    prompt_tokens: int | None = None,
) -> Prices:
    """``prompt_tokens``: the request's uncached prompt, which bounds its start rate
    while it has no token history (None: the unbounded start)."""
    x = rates.token_rate
    if x is None and prompt_tokens is not None:
        x = norms.start_rate(prompt_tokens)
    token_term = _fairness(policy.token_fairness, x, norms.token_rate)
    delivery = (
        _fairness(policy.delivery_fairness, rates.delivery_rate, norms.delivery_rate)
        if is_decoder
        else first_delivery_price(norms, policy)
    )
    return Prices(
        prefill_token=1.0 + token_term,
        output_token=policy.beta + token_term,
        delivery=delivery,
    )
