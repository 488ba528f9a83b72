"""Acceptance estimates: per-request, per-source prefix survival means.
s_d estimates the probability that the first d drafts of a round are all accepted."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ignition.helios.types import DraftSource

INITIAL_WEIGHT = 2.0
MAX_WEIGHT = 128.0
HALF_LIFE_TOKENS = 128.0
POPULATION_STEP = 1.0 / 64.0
OPTIMISM_LOG = math.log(20.0)


@dataclass
class PopulationPrior:
    """A population mean per depth that starts at 0.5^d and moves 1/64 toward data.

    With ``bounds_requests`` (PolicyConfig.population_bounded_optimism) it also bounds
    the optimism of the requests it seeds: a request is no more optimistic at a depth
    than its own mean or the population's ``upper`` bound, whichever is higher
    (docs/scheduling.md, "Probe optimism bounded by the population")."""

    means: list[float] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)  # observations per depth
    bounds_requests: bool = False
    version: int = 0  # observations so far: a request's cached bound is that old
    # PolicyConfig.population_bound_memory: the bound's own discounted sums and weights
    # per depth (0: the bound reads the moving mean above)
    bound_memory: float = 0.0
    bound_sums: list[float] = field(default_factory=list)
    bound_weights: list[float] = field(default_factory=list)

    def mean(self, depth: int) -> float:
        while len(self.means) < depth:
            self.means.append(0.5 ** (len(self.means) + 1))
            self.counts.append(0)
            self.bound_sums.append(0.0)
            self.bound_weights.append(0.0)
        return self.means[depth - 1]

    def observe(self, depth: int, value: float) -> None:
        current = self.mean(depth)
        self.means[depth - 1] = current + (value - current) * POPULATION_STEP
        self.counts[depth - 1] += 1
        self.version += 1
        if self.bound_memory > 0:
            keep = 1.0 - 1.0 / self.bound_memory
            self.bound_sums[depth - 1] = self.bound_sums[depth - 1] * keep + value
            self.bound_weights[depth - 1] = self.bound_weights[depth - 1] * keep + 1.0

    def upper(self, depth: int) -> float:
        """An upper confidence bound on the population's survival at ``depth``. With a
        ``bound_memory`` N: the mean of its observations discounted by 1 - 1/N each, plus
        the bonus at their discounted weight. Without: the moving mean, plus the pull its
        0.5^d start still has on it, plus the bonus at min(observations, 64), the moving
        mean's memory, whose noise a burst of one frame's observations moves."""
        mean = self.mean(depth)
        n = self.counts[depth - 1]
        if n == 0:
            return 1.0
        if self.bound_memory > 0:
            weight = self.bound_weights[depth - 1]
            bonus = math.sqrt(OPTIMISM_LOG / (2.0 * weight))
            return min(1.0, self.bound_sums[depth - 1] / weight + bonus)
        pull = (1.0 - POPULATION_STEP) ** n
        weight = min(float(n), 1.0 / POPULATION_STEP)
        return min(1.0, mean + pull + math.sqrt(OPTIMISM_LOG / (2.0 * weight)))


class SourcePriors:
    """One population prior per proposal source: a copy source's acceptance says nothing
    of the learned source's, so neither moves the other's prior (the seed: each request
    tracks acceptance by source)."""

    def __init__(self, bounds_requests: bool = False, bound_memory: float = 0.0) -> None:
        self._by_source: dict[DraftSource, PopulationPrior] = {}
        self._bounds_requests = bounds_requests
        self._bound_memory = bound_memory if bounds_requests else 0.0

    def of(self, source: DraftSource) -> PopulationPrior:
        found = self._by_source.get(source)
        if found is None:
            found = self._by_source[source] = PopulationPrior(
                bounds_requests=self._bounds_requests, bound_memory=self._bound_memory
            )
        return found


@dataclass
class PrefixEstimate:
    mean: float
    weight: float = INITIAL_WEIGHT

    def age(self, num_tokens: int) -> None:
        if num_tokens > 0:
            self.weight *= 0.5 ** (num_tokens / HALF_LIFE_TOKENS)

    def observe(self, value: float) -> None:
        new_weight = self.weight + 1.0
        self.mean += (value - self.mean) / new_weight
        self.weight = min(MAX_WEIGHT, new_weight)

    def optimistic(self) -> float:
        """The bounded optimistic estimate funded learning uses."""
        return min(1.0, self.mean + math.sqrt(OPTIMISM_LOG / (2.0 * max(self.weight, 1e-9))))


class PrefixHistory:
    """Per-depth estimates for one request and one source (or one forecast)."""

    def __init__(self, prior: PopulationPrior, preseed: Sequence[float] = ()) -> None:
        self._prior = prior
        self._estimates: list[PrefixEstimate] = [PrefixEstimate(float(p)) for p in preseed]
        self._survivals: dict[int, tuple[float, ...]] = {}  # planning reads far more than data
        self._optimistic: dict[int, tuple[float, ...]] = {}
        self._optimistic_outputs: dict[tuple[int, float], tuple[float, ...]] = {}
        self._bound_version = -1  # the prior's version the optimistic caches were made at

    def _at(self, depth: int) -> PrefixEstimate:
        while len(self._estimates) < depth:
            self._estimates.append(PrefixEstimate(self._prior.mean(len(self._estimates) + 1)))
        return self._estimates[depth - 1]

    def survivals(self, max_depth: int) -> tuple[float, ...]:
        """s_1..s_max_depth, made nonincreasing (a longer prefix never survives more)."""
        found = self._survivals.get(max_depth)
        if found is None:
            found = self._survivals[max_depth] = self._nonincreasing(max_depth, _mean)
        return found

    def _nonincreasing(
        self, max_depth: int, value: Callable[[PrefixEstimate, int], float]
    ) -> tuple[float, ...]:
        """``value`` of each depth's estimate, clipped to [0, 1] and made nonincreasing."""
        out: list[float] = []
        ceiling = 1.0
        for depth in range(1, max_depth + 1):
            ceiling = min(ceiling, max(0.0, value(self._at(depth), depth)))
            out.append(ceiling)
        return tuple(out)

    def optimistic(self, depth: int) -> float:
        return self._optimistic_at(self._at(depth), depth)

    def _optimistic_at(self, estimate: PrefixEstimate, depth: int) -> float:
        """The estimate's own optimistic value; where the prior bounds requests, no higher
        than its own mean or the population's upper bound, whichever is higher."""
        own = estimate.optimistic()
        if not self._prior.bounds_requests:
            return own
        return min(own, max(estimate.mean, self._prior.upper(depth)))

    def _fresh_bounds(self) -> None:
        """Drops the optimistic caches once the population moved (its bound with it)."""
        if self._prior.bounds_requests and self._bound_version != self._prior.version:
            self._optimistic.clear()
            self._optimistic_outputs.clear()
            self._bound_version = self._prior.version

    def optimistic_survivals(self, max_depth: int) -> tuple[float, ...]:
        """min(1, mean + sqrt(ln 20 / (2 * aged weight))) per depth, bounded by the
        population where its prior bounds requests, made nonincreasing: what funded
        acceptance learning scores probes with."""
        self._fresh_bounds()
        found = self._optimistic.get(max_depth)
        if found is None:
            found = self._optimistic[max_depth] = self._nonincreasing(
                max_depth, self._optimistic_at
            )
        return found

    def optimistic_outputs(self, max_depth: int, alpha: float) -> tuple[float, ...]:
        """[q] -> optimistic expected output with q target rows (index 0 unused)."""
        key = (max_depth, alpha)
        self._fresh_bounds()
        found = self._optimistic_outputs.get(key)
        if found is None:
            out, total = [0.0, 1.0], 1.0
            for s in self.optimistic_survivals(max_depth):
                total += s**alpha
                out.append(total)
            found = self._optimistic_outputs[key] = tuple(out)
        return found

    def weight(self, depth: int) -> float:
        return self._at(depth).weight

    def age(self, num_tokens: int) -> None:
        if num_tokens > 0:
            self._optimistic.clear()
            self._optimistic_outputs.clear()
        for estimate in self._estimates:
            estimate.age(num_tokens)

    def observe(self, depth: int, value: float) -> None:
        self._survivals.clear()
        self._optimistic.clear()
        self._optimistic_outputs.clear()
        self._at(depth).observe(value)
        self._prior.observe(depth, value)


def _mean(estimate: PrefixEstimate, _depth: int) -> float:
    return estimate.mean


class AcceptanceTracker:
    """Acceptance histories of one request, one per proposal source."""

    def __init__(
        self, prior: PopulationPrior | SourcePriors, preseed: Sequence[float] = ()
    ) -> None:
        self._prior = prior  # SourcePriors: each source's history starts at its own prior
        self._preseed = tuple(preseed)
        # Keyed by the source's name: a DraftSource hashes in Python, a str's hash is cached.
        self._by_source: dict[str, PrefixHistory] = {}

    def history(self, source: DraftSource) -> PrefixHistory:
        found = self._by_source.get(source.name)
        if found is None:
            prior = self._prior
            if isinstance(prior, SourcePriors):
                prior = prior.of(source)
            found = self._by_source[source.name] = PrefixHistory(prior, self._preseed)
        return found

    def observe_round(
        self,
        source: DraftSource,
        *,
        num_offered_drafts: int,
        num_accepted_drafts: int,
        is_terminated: bool,
        survival: Sequence[float] | None = None,
        num_generated_tokens: int = 0,
    ) -> None:
        """Update from one completed round; width-one rounds (no drafts) supply nothing."""
        history = self.history(source)
        history.age(num_generated_tokens)
        if num_offered_drafts <= 0:
            return
        if survival is not None:
            for depth, value in enumerate(survival[:num_offered_drafts], start=1):
                history.observe(depth, min(1.0, max(0.0, float(value))))
            return
        for depth in range(1, num_accepted_drafts + 1):
            history.observe(depth, 1.0)
        if is_terminated:
            return
        for depth in range(num_accepted_drafts + 1, num_offered_drafts + 1):
            history.observe(depth, 0.0)


def expected_output(survivals: Sequence[float], query_length: int, alpha: float) -> float:
    """1 + sum(s_1..s_(q-1)) with each s raised to alpha."""
    total = 1.0
    for s in survivals[: max(0, query_length - 1)]:
        total += s**alpha
    return total


class ConfidenceForecast:
    """A request's forecast of completed joint-prefix probabilities (the device's
    allocation key); starts from a population prior at 0.5^d."""

    def __init__(self, prior: PopulationPrior) -> None:
        self._history = PrefixHistory(prior)

    def means(self, max_depth: int) -> tuple[float, ...]:
        return self._history.survivals(max_depth)

    def observe(self, joint_prefix: Sequence[float], ceiling: int, num_tokens: int) -> None:
        """Forecast observations stop at the lane's frozen min(D + 1, W) ceiling."""
        self._history.age(num_tokens)
        for depth, p in enumerate(joint_prefix[: max(0, ceiling - 1)], start=1):
            self._history.observe(depth, p)
