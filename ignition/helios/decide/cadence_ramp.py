"""The cadence ramp: a decoder's delivery and age prices rise only as it nears its TBT target."""

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
