"""How much a decoder's delivery is worth in a round: the value of a wider round.

PROTOTYPE (issue 40 item 1): candidates under measurement.
"""

from __future__ import annotations

from ignition.helios.decide.service import Prices


def per_token(prices: Prices) -> Prices:
    """The delivery price folded into the output-token price."""
    return Prices(prices.prefill_token, prices.output_token + prices.delivery, 0.0)


def near_target_factor(age_ms: float, target_ms: float, power: float) -> float:
    if target_ms <= 0 or power <= 0:
        return 1.0
    return min(1.0, age_ms / target_ms) ** power


import os
GATE_AGE = os.environ.get("H40_GATE_AGE", "1") == "1"
GATE_WAIT = os.environ.get("H40_GATE_WAIT", "0") == "1"


def age_weight(policy, decoders, pending):
    if policy.delivery_near_target <= 0 or not GATE_WAIT:
        return None
    return sum(
        near_target_factor(v.age_ms, policy.tbt_target_ms, policy.delivery_near_target)
        for v in (*decoders, *pending)
        if v.is_decoder
    )
