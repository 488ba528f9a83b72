"""Slot pressure: while requests wait for a slot, a resident decoder's tokens are worth more."""

from __future__ import annotations

from ignition.helios.decide.service import Prices


def pressure_factor(weight: float, waiting: int, decoders: int) -> float:
    """The multiplier on decoders' output-token price (1.0: the rule is idle)."""
    if weight <= 0 or waiting <= 0 or decoders <= 0:
        return 1.0
    return 1.0 + weight * min(waiting, decoders) / decoders


def pressured(prices: Prices, factor: float) -> Prices:
    """``prices`` with the output-token price multiplied by ``factor``."""
    if factor == 1.0:
        return prices
    return Prices(prices.prefill_token, prices.output_token * factor, prices.delivery)
