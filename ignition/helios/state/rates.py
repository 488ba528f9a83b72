"""A request's aged service rates and the normalizers they start from."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from ignition.helios.state.prompt_starts import PromptStarts


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
    by_family: Mapping[str, Normalizers] = field(default_factory=dict, compare=False)
    prompt_starts: PromptStarts | None = None

    def for_family(self, family: str) -> Normalizers:
        return self.by_family.get(family, self)

    def start_rate(self, prompt_tokens: int) -> float | None:
        """The token rate a request without token history starts at, given the prompt
        tokens it must consume (``RequestSpec.uncached_prompt_tokens``)."""
        starts = self.prompt_starts
        return self.token_rate if starts is None else starts.rate(prompt_tokens)


def stream_family(proposal_source: str) -> str:
    """The family a delivery-bearing stream belongs to for its reference interval."""
    return proposal_source


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
    prompt_tokens: int | None = None,
) -> ServiceRates:
    """One measured interval of the entropy-dual update; returns new rates. Without
    token history x starts at the newcomer start (``prices``' ``prompt_tokens``)."""
    a = decay(duration_ms, adaptation_ms)
    x0 = rates.token_rate
    if x0 is None:
        start = norms.token_rate if prompt_tokens is None else norms.start_rate(prompt_tokens)
        x0 = start or 0.0
    x = a * x0 + (1 - a) * tokens / duration_ms
    z = rates.delivery_rate
    if is_decoder:
        z0 = z if z is not None else (norms.delivery_rate or 0.0)
        z = a * z0 + (1 - a) * deliveries / duration_ms
    return ServiceRates(token_rate=x, delivery_rate=z)
