"""The decoder table of the bounded search: ``decide.rounds.LaneTable``'s values, built
for speed."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import fields

from ignition.helios.decide import rounds
from ignition.helios.decide.utility import Decision, LaneView
from ignition.helios.fast.lane_core import LaneArrays, LaneLists, lane_arrays

_OUTPUTS: dict[tuple, list[float]] = {}


def expected_outputs(own: tuple[float, ...], alpha: float, max_depth: int) -> list[float]:
    """[q] -> expected output with q rows."""
    key = (own, alpha, max_depth)
    found = _OUTPUTS.get(key)
    if found is None:
        outputs, total = [0.0, 1.0], 1.0
        for depth in range(max_depth):
            s = own[depth] if depth < len(own) else 0.0
            total += s**alpha
            outputs.append(total)
        if len(_OUTPUTS) > 65536:
            _OUTPUTS.clear()
        found = _OUTPUTS[key] = outputs
    return found


_LANE_VIEW_FIELDS = operator.attrgetter(*(f.name for f in fields(LaneView)))


def _twin(view: LaneView, survivals: tuple[float, ...]) -> LaneView:
    """``view`` with other survivals: every field read in one C call and passed to the
    constructor, as copy.copy of a slots dataclass goes through the pickle protocol at
    about four times the cost (and a setattr per field at twice)."""
    twin = LaneView(*_LANE_VIEW_FIELDS(view))
    twin.survivals = survivals
    return twin


class LaneTable(rounds.LaneTable):
    """``decide.rounds.LaneTable`` with its orders, prefixes and leaders read from
    arrays; its cohorts are the definition's."""

    def __init__(
        self,
        views: Sequence[LaneView],
        decision: Decision,
        max_depth: int,
        survivals: Sequence[tuple[float, ...]] | None = None,
        outputs: Sequence[Sequence[float]] | None = None,
        arrays: LaneArrays | LaneLists | None = None,
        fixed: Sequence[float] | None = None,
    ) -> None:
        """``survivals`` replaces the views' own (acceptance learning scores probes with
        optimistic estimates); views carrying them are made only when a cohort needs one."""
        self.views = list(views)
        self.decision = decision
        self._survivals = survivals
        self._twins: dict[int, LaneView] = {}
        self.fixed: list[float] = []  # delivery price + age value at T = 0
        self._outputs: list[list[float]] = []  # [q] -> expected output with q rows
        alpha = decision.alpha
        if fixed is not None:
            self.fixed = list(fixed)
        for i, v in enumerate(self.views):
            if fixed is None:
                self.fixed.append(v.prices.delivery + decision.age_value(v.sigma_ms, v.age_ms, 0.0))
            if outputs is not None:
                self._outputs.append(outputs[i])
                continue
            own = v.survivals if survivals is None else survivals[i]
            self._outputs.append(expected_outputs(own, alpha, max_depth))
        self._orders: dict[int, list[tuple[int, int, float]]] = {}
        self._prefixes: dict[tuple[int, int], tuple[list, int, float, float]] = {}
        self._bounds: dict[tuple[int, int], float] = {}
        self._top_sigmas: list[float] | None = None
        self._arrays = arrays

    def _view(self, i: int) -> LaneView:
        if self._survivals is None:
            return self.views[i]
        twin = self._twins.get(i)
        if twin is None:
            twin = self._twins[i] = _twin(self.views[i], self._survivals[i])
        return twin

    def order(self, cap: int) -> list[tuple[int, int, float]]:
        """(view index, ceiling, value without the duration term), best first."""
        found = self._orders.get(cap)
        if found is None:
            found = self._orders[cap] = self.arrays.order(cap)
        return found

    @property
    def arrays(self) -> LaneArrays | LaneLists:
        """The views' values at every ceiling as arrays (lane_core.py; lists for a small
        table), built once."""
        if self._arrays is None:
            self._arrays = lane_arrays(self.views, self.fixed, self._outputs)
        return self._arrays

    def _head(self, cap: int, max_lanes: int) -> list[tuple[int, int, float]]:
        """The first ``max_lanes`` of ``order(cap)``, without sorting the whole order when
        it has not been built (the numpy core's partial selection)."""
        full = self._orders.get(cap)
        return full[:max_lanes] if full is not None else self.arrays.head(cap, max_lanes)

    def value_bound(self, cap: int, max_lanes: int, duration_ms: float) -> float:
        """A true upper bound on the value of any decode cohort of at most ``max_lanes``
        lanes with row ceilings at most ``cap``, whatever the row budget or allocation."""
        key = (cap, max_lanes)
        found = self._bounds.get(key)
        if found is None:
            found = self._bounds[key] = self.arrays.positive_sum(cap, max_lanes)
        if self._top_sigmas is None:
            sigmas = sorted((v.sigma_ms or 0.0 for v in self.views), reverse=True)
            running, self._top_sigmas = 0.0, [0.0]
            for s in sigmas:
                running += max(0.0, s)
                self._top_sigmas.append(running)
        sigma = self._top_sigmas[min(max_lanes, len(self._top_sigmas) - 1)]
        return found + max(0.0, self.decision.age_value(sigma, 0.0, duration_ms))

    def _leaders(self, cap: int, length: int, duration_ms: float) -> list[LaneView]:
        """Views that can appear in the first ``length`` places of any bounded ordering."""
        chosen = {i for i, _, _ in self.arrays.head(cap, length)}
        chosen |= {i for i, _, _ in self.arrays.head(1, length)}
        chosen.update(self.arrays.best_per_row(cap, length, self.decision.age_price, duration_ms))
        return [self._view(i) for i in sorted(chosen)]
