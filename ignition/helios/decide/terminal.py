"""Terminal retirement: the value of finishing a request through a snapshot program."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ignition.helios.types import SchedulerError


@dataclass(frozen=True)
class TerminalPrices:
    """The policy's terminal coefficients after the decision's common scale."""

    value: float  # terminal_value, scaled
    age_price: float  # terminal_age_price, scaled

    def __post_init__(self) -> None:
        for name in ("value", "age_price"):
            x = getattr(self, name)
            if not math.isfinite(x) or x < 0:
                raise SchedulerError(f"TerminalPrices.{name} = {x!r}: finite and nonnegative")


def terminal_lane_value(
    prices: TerminalPrices, sigma_ms: float | None, age_ms: float, duration_ms: float
) -> float:
    """terminal_value + terminal_age_price * sigma * (A + T); no sigma, no age value."""
    if sigma_ms is None or prices.age_price == 0:
        return prices.value
    return prices.value + prices.age_price * sigma_ms * (age_ms + duration_ms)


def waiting_coefficient(
    decode_age_price: float, num_active_decoders: int, terminal_age_price: float, num_terminal: int
) -> float:
    """The sum of age coefficients that every candidate's common waiting cost multiplies:
    active decoders at the decode-age price plus pending retirements at the terminal one."""
    return decode_age_price * num_active_decoders + terminal_age_price * num_terminal


def saved_waiting(age_price: float, stop_ms: float, total_ms: float) -> float:
    """Value of a row that stops ageing at ``stop_ms`` inside a ``total_ms`` sequence."""
    if total_ms <= stop_ms:
        return 0.0
    return age_price * (total_ms * total_ms - stop_ms * stop_ms) / 2.0


@dataclass(frozen=True)
class TerminalView:
    """A request awaiting terminal retirement, as one decision sees it."""

    handle: object  # RequestHandle (kept loose: types imports nothing from here)
    epoch: int
    age_ms: float
    checkpoint_tokens: int
    last_served_seq: int
