"""The cadence ramp: a decoder's delivery and age prices rise only as it nears its TBT target.

Under the seed's balanced coefficients a decoder's lane in a generation frame is worth
its expected output tokens at the output-token price plus one delivery (g / z) plus its
age value c * sigma * (A + T), and every active decoder's age costs the frame
c * T / 2 per ms (``utility.Decision.waiting_cost``). The delivery and age terms are the
same whatever the round's width, so they favour the shortest frame even where a wider
round buys more tokens per ms. What users measure is tokens per time (TPOT) and the gap
between deliveries (TBT), and the TBT target already names the gap that matters.

With ``PolicyConfig.cadence_ramp`` = p > 0 and a TBT target tau > 0, each decoder's
cadence prices are multiplied by

    r_i = min(1, A_i / tau) ** p

A_i its output age at the decision's projected start: its delivery price (g / z_i), its
age value (through its reference interval sigma_i, so c * r_i * sigma_i * (A_i + T))
and its share of the waiting cost (the decision's age weight, the sum of r_i over the
decoder views, in place of the number of active decoders). Right after a delivery a
decoder's round is worth its tokens, so the frame with the most tokens per ms wins (a
wider one where acceptance pays for it); as its gap nears the target its cadence prices
return to the seed's, and a delivery is worth what it was. The token prices, the
terminal prices and the prompt rows are untouched; multistage-blocked decoders' chains
keep their individual future-delivery reference (decide/chains.py), unramped.
Applied to the views in both projections (decide/ and fast/), after the decision's
common scale (which the ramp only lowers), so the two selectors see the same values.
Measured in ``docs/scheduling.md`` ("The cadence ramp").
"""

from __future__ import annotations

from collections.abc import Iterable

from ignition.helios.config import PolicyConfig
from ignition.helios.decide.utility import LaneView


def ramp(policy: PolicyConfig, age_ms: float) -> float:
    """r_i for a decoder of output age ``age_ms`` (1.0: the rule is off)."""
    power, target = policy.cadence_ramp, policy.tbt_target_ms
    if power <= 0 or target <= 0:
        return 1.0
    return min(1.0, age_ms / target) ** power


def is_on(policy: PolicyConfig) -> bool:
    """Whether the ramp changes any price (a power and a TBT target)."""
    return policy.cadence_ramp > 0 and policy.tbt_target_ms > 0


def age_weight(policy: PolicyConfig, views: Iterable[LaneView]) -> float | None:
    """The decoders' weight in the waiting cost: the sum of r_i over the decoder views in
    order (None while the rule is off: the number of active decoders, as before)."""
    if not is_on(policy):
        return None
    return sum(ramp(policy, v.age_ms) for v in views if v.is_decoder)
