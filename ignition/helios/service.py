"""Service prices: aged token and delivery rates and the prices they imply.

See scheduling-utility.md. Rates are stored in physical units (tokens/ms,
deliveries/ms); only validated service changes them, never a phase change, an
acceptance update or a normalizer change.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from ignition.components.catalog import Descriptor, GraphKind
from ignition.helios.config import PolicyConfig

RATE_FLOOR_FRACTION = 1e-9
GENERATION_KINDS = (GraphKind.DECODE, GraphKind.SPECULATIVE, GraphKind.MIXED)


@dataclass
class ServiceRates:
    """x (tokens/ms) and z (deliveries/ms); None until there is history."""

    token_rate: float | None = None
    delivery_rate: float | None = None


@dataclass(frozen=True)
class Normalizers:
    """Starting rates for missing history, from the applicable measured catalog."""

    token_rate: float | None = None
    delivery_rate: float | None = None
    sigma_ms: float | None = None


@dataclass(slots=True)
class Prices:
    prefill_token: float
    output_token: float
    delivery: float

    @property
    def largest(self) -> float:
        return max(self.prefill_token, self.output_token, self.delivery)


def reference_interval_ms(
    measured: Iterable[tuple[Descriptor, float]], num_streams: int
) -> float | None:
    """sigma = K * T / min(B, K) for the measured generation graph minimizing T / min(B, K)."""
    if num_streams <= 0:
        return None
    best: float | None = None
    for d, t_ms in measured:
        if d.kind not in GENERATION_KINDS or t_ms <= 0:
            continue
        per_stream = t_ms / min(d.batch_capacity, num_streams)
        if best is None or per_stream < best:
            best = per_stream
    return None if best is None else num_streams * best


def _useful_tokens(d: Descriptor, rows: int) -> int:
    if d.kind is GraphKind.PREFILL:
        return rows * d.token_capacity
    if d.kind is GraphKind.MIXED:
        return d.prefill_capacity + (rows - 1)
    if d.kind in GENERATION_KINDS:
        return rows
    return 0


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
        rate = _useful_tokens(d, rows) / (k * t_ms)
        if rate > 0 and (best is None or rate > best):
            best = rate
    return best


def normalizers(
    measured: list[tuple[Descriptor, float]], num_token_streams: int, num_delivery_streams: int
) -> Normalizers:
    sigma = reference_interval_ms(measured, max(1, num_delivery_streams))
    return Normalizers(
        token_rate=token_normalizer(measured, num_token_streams),
        delivery_rate=None if sigma is None else 1.0 / sigma,
        sigma_ms=sigma,
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


def prices(
    rates: ServiceRates, norms: Normalizers, policy: PolicyConfig, is_decoder: bool
) -> Prices:
    token_term = _fairness(policy.token_fairness, rates.token_rate, norms.token_rate)
    delivery = (
        _fairness(policy.delivery_fairness, rates.delivery_rate, norms.delivery_rate)
        if is_decoder
        else 0.0
    )
    return Prices(
        prefill_token=1.0 + token_term,
        output_token=policy.beta + token_term,
        delivery=delivery,
    )


def decay(duration_ms: float, adaptation_ms: float) -> float:
    return math.exp(-duration_ms / adaptation_ms)


def advance_rates(
    rates: ServiceRates,
    *,
    duration_ms: float,
    tokens: float,
    deliveries: float,
    norms: Normalizers,
    is_decoder: bool,
    adaptation_ms: float,
) -> ServiceRates:
    """One measured interval of the entropy-dual update; returns new rates."""
    a = decay(duration_ms, adaptation_ms)
    x0 = rates.token_rate if rates.token_rate is not None else (norms.token_rate or 0.0)
    x = a * x0 + (1 - a) * tokens / duration_ms
    z = rates.delivery_rate
    if is_decoder:
        z0 = z if z is not None else (norms.delivery_rate or 0.0)
        z = a * z0 + (1 - a) * deliveries / duration_ms
    return ServiceRates(token_rate=x, delivery_rate=z)
