"""Slot pressure: while requests wait for a slot, a resident decoder's tokens are worth more.

Under the balanced coefficients a speculative round is worth about one delivery whatever
its width, so Helios verifies at width one; but while requests wait for admission, each
extra token a resident decoder commits brings forward its slot's release and so the
waiting requests' admission (their TTFT includes that wait). With
``PolicyConfig.slot_pressure`` = w > 0 and W requests waiting for a slot (the scheduler's
``note_waiting`` input) among D active decoders, every decoder's output-token price is
multiplied by

    1 + w * min(W, D) / D

(the delivery and prefill prices stay), so a wider round's extra expected tokens are
worth more exactly while slots are scarce. With no one waiting, or w = 0, nothing
changes. Applied to the views in both projections (decide/ and fast/), so the two
selectors see the same prices. Measured in ``docs/scheduling.md`` ("Slot pressure").
"""

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
