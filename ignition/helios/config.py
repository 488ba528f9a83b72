"""Policy preferences: the throughput/cadence trade-off Helios maximizes."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from enum import StrEnum

from ignition.helios.types import SchedulerError


class SpeculationMode(StrEnum):
    """Fixed width keeps complete prefixes; adaptive lets host or device allocate rows."""

    FIXED = "fixed"
    ADAPTIVE = "adaptive"


# The newcomer rules PolicyConfig.newcomer_rule may name: the start of a request without
# token history (docs/scheduling.md); decide/utility.py NEWCOMER_RULES implements each.
NEWCOMER_RULE_NAMES = ("balanced", "whole-prompt", "generation", "normalizer")


@dataclass(frozen=True)
class PolicyConfig:
    output_token_value: float = 64.0  # prompt-value units per output token
    token_fairness: float = 16.0  # token-rate log-utility coefficient, value/ms
    delivery_fairness: float = 4.0  # delivery-rate log-utility coefficient, value/ms
    decode_age_price: float = 0.1  # linear output-age cost, value/ms^2
    terminal_value: float = 256.0  # value per terminal retirement, prompt-token units
    terminal_age_price: float = 1.0  # linear terminal-wait cost, value/ms^2
    adaptation_ms: float = 100.0  # service-price adaptation time
    estimate_ttl_ns: int = 30_000_000_000  # timing freshness interval
    adaptive_verification_alpha: float = 1.0  # exponent on prefix survivals
    # weight on the delivery price g / z at the delivery normalizer that the chunk
    # finishing a prompt earns (its first output is the request's first delivery); 0 off
    first_delivery: float = 0.0
    # issue 40 (docs/scheduling.md, "Chunks sized to the TBT target"): the gap between a
    # decoder's deliveries that a prompt frame may cause, ms; 0 off (the seed's presets)
    tbt_target_ms: float = 0.0
    # issue 40 ("Decoders left out of generation frames"): a generation frame leaving
    # ready decoders out is scored as the sequence with the frame they then need
    generation_left_out: bool = False
    # issue 40 ("Slot pressure"): while requests wait for a slot, decoders' output-token
    # price is multiplied by 1 + slot_pressure * min(waiting, decoders) / decoders; 0 off
    slot_pressure: float = 0.0
    # issues 39/40 ("A mixed program carrying no prompt"): a mixed program offers no
    # decode-only cohort where a generation program of its batch, width and depth exists
    generation_twin: bool = False
    # issue 40 item 2 ("A started prompt's chunks follow one another"): while a started
    # prompt could take a chunk within every ready decoder's TBT target (tbt_target_ms >
    # 0), frames carrying no prompt are rejected
    prompt_runs: bool = False
    # issue 40 ("The cadence ramp"): a decoder's delivery and age prices are multiplied by
    # min(1, age / tbt_target_ms) ** cadence_ramp; 0 off, inactive without a TBT target
    cadence_ramp: float = 0.0
    # issue 40 ("Mixed frames at the generation rate"): a winning mixed frame runs at the
    # sibling width whose value net of the best generation frame's rate is highest
    mixed_width: bool = False
    # issue 39 ("Speculation within the TBT target"): a speculative frame carrying no
    # prompt whose estimate exceeds tbt_target_ms is rejected (ordinary and probes alike)
    speculation_within_target: bool = False
    # issue 39 ("Refresh what could win"): funded timing refresh displaces the winner only
    # with a stale alternative whose score at its fastest recent sample would beat it
    # (decide/refresh.py); off: any stale alternative, the seed's rule
    refresh_could_win: bool = False
    # the start of a request without token history (NEWCOMER_RULE_NAMES); the other
    # rules are kept for before/after studies (scripts/scheduling_sim)
    newcomer_rule: str = "balanced"
    # issue 29 ("Decoders left out of prompt frames", decide/left_out.py): a prompt frame
    # leaving ready decoders out is scored as the sequence with the frame they then need;
    # off only for before/after studies (the simulator's helios+keep-left-out)
    left_out: bool = True
    # issue 39 ("Probe optimism bounded by the population"): a request's optimistic
    # acceptance (probes, source choice) is at most its own mean or its population's
    # upper bound, whichever is higher; off: each request's own bound alone (the seed)
    population_bounded_optimism: bool = False
    # the population's bound: a mean over its last ~N observations per depth (discounted
    # by 1 - 1/N each) plus that many observations' bonus; 0: the prior's own moving mean
    # (memory 64) plus its start's pull, the bound's first form (issue 39)
    population_bound_memory: float = 0.0

    def __post_init__(self) -> None:
        if self.newcomer_rule not in NEWCOMER_RULE_NAMES:
            raise SchedulerError(
                f"PolicyConfig.newcomer_rule = {self.newcomer_rule!r}: expected one of "
                f"{list(NEWCOMER_RULE_NAMES)}"
            )
        for f in fields(self):
            if f.name == "newcomer_rule":
                continue
            value = getattr(self, f.name)
            if isinstance(f.default, bool):
                if not isinstance(value, bool):
                    raise SchedulerError(
                        f"PolicyConfig.{f.name} = {value!r}: expected true or false"
                    )
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise SchedulerError(f"PolicyConfig.{f.name} = {value!r}: expected a number")
            if not math.isfinite(value) or value < 0:
                raise SchedulerError(
                    f"PolicyConfig.{f.name} = {value!r}: must be finite and nonnegative"
                )
        if 0 < self.population_bound_memory < 1:
            raise SchedulerError(
                f"PolicyConfig.population_bound_memory = {self.population_bound_memory!r}: "
                "must be 0 (the moving mean) or at least one observation"
            )
        if self.adaptive_verification_alpha <= 0:
            raise SchedulerError(
                f"PolicyConfig.adaptive_verification_alpha = "
                f"{self.adaptive_verification_alpha!r}: must be greater than zero"
            )
        if self.adaptation_ms <= 0:
            raise SchedulerError(
                f"PolicyConfig.adaptation_ms = {self.adaptation_ms!r}: must be positive"
            )

    @property
    def beta(self) -> float:
        return self.output_token_value

    def with_terminal(
        self, terminal_value: float | None = None, terminal_age_price: float | None = None
    ) -> PolicyConfig:
        """Terminal overrides apply after preset selection (--scheduler-terminal-*)."""
        changes: dict[str, float] = {}
        if terminal_value is not None:
            changes["terminal_value"] = terminal_value
        if terminal_age_price is not None:
            changes["terminal_age_price"] = terminal_age_price
        return replace(self, **changes)

    def with_alpha(self, alpha: float) -> PolicyConfig:
        return replace(self, adaptive_verification_alpha=alpha)


def balanced() -> PolicyConfig:
    """The seed's default coefficients, without the issue-40 rules."""
    return PolicyConfig()


OBJECTIVE_TBT_TARGET_MS = 75.0
OBJECTIVE_CADENCE_RAMP = 2.0
POPULATION_BOUND_MEMORY = 1024.0


def flat_cadence() -> PolicyConfig:
    """The objective preset before the cadence ramp (issue 40): the seed's balanced
    coefficients with prompt frames sized to a 75 ms TBT target, a started prompt's chunks
    back to back within it and mixed programs carrying no prompt yielding to their
    generation twins; every decoder's delivery and age prices count in full whatever its
    age."""
    return PolicyConfig(
        tbt_target_ms=OBJECTIVE_TBT_TARGET_MS, prompt_runs=True, generation_twin=True
    )


def objective() -> PolicyConfig:
    """The default preset (issue 40, docs/scheduling.md "The objective preset"): the
    ``flat_cadence`` preset (a 75 ms TBT target, prompt runs, generation twins) with the
    decoders' delivery and age prices ramped in as they near the target, and generation
    frames that leave ready decoders out scored with the frame those then need, and a
    winning mixed frame at the width its decoders earn most net of the generation rate
    (decide/mixed_width.py), and probe optimism bounded by the request's population over
    its last 1,024 observations (state/acceptance.py), and no speculative frame past the
    TBT target (decide/chunk_target.py), and timing refresh only of alternatives that
    could win (decide/refresh.py)."""
    return replace(
        flat_cadence(),
        cadence_ramp=OBJECTIVE_CADENCE_RAMP,
        generation_left_out=True,
        mixed_width=True,
        population_bounded_optimism=True,
        population_bound_memory=POPULATION_BOUND_MEMORY,
        speculation_within_target=True,
        refresh_could_win=True,
    )


def throughput() -> PolicyConfig:
    """Keeps token fairness and output value; drops delivery fairness and age price."""
    return PolicyConfig(delivery_fairness=0.0, decode_age_price=0.0)


PRESETS: dict[str, Callable[[], PolicyConfig]] = {
    "objective": objective,
    "flat-cadence": flat_cadence,
    "balanced": balanced,
    "throughput": throughput,
}
DEFAULT_PRESET = "objective"


def policy_from_preset(
    name: str,
    *,
    terminal_value: float | None = None,
    terminal_age_price: float | None = None,
    adaptive_verification_alpha: float | None = None,
    **overrides: float | bool | str,
) -> PolicyConfig:
    """A preset, then field overrides, then terminal overrides (the CLI's order)."""
    if name not in PRESETS:
        raise SchedulerError(f"unknown scheduler policy {name!r}; expected one of {list(PRESETS)}")
    known = {f.name for f in fields(PolicyConfig)}
    for key in overrides:
        if key not in known:
            raise SchedulerError(f"unknown PolicyConfig field {key!r}")
    policy = replace(PRESETS[name](), **overrides)
    if adaptive_verification_alpha is not None:
        policy = policy.with_alpha(adaptive_verification_alpha)
    return policy.with_terminal(terminal_value, terminal_age_price)
