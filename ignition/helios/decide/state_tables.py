"""The tables one state decision shares across its pairs: the inference shapes'
durations, widths and completion times (memoised on the cost estimates' version) and
the terminal rows' contributions."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios.config import PolicyConfig
from ignition.helios.decide.policy import Population
from ignition.helios.decide.prerequisites import TerminalContribution
from ignition.helios.decide.state_rows import _ms, following_rows, terminal_sigma_ms
from ignition.helios.decide.tails import CompletionTimes
from ignition.helios.decide.terminal import (
    TerminalPrices,
    TerminalView,
    saved_waiting,
    terminal_lane_value,
)
from ignition.helios.decide.utility import Decision
from ignition.helios.state.cost import CostModel


class _Shapes:
    """What the pair lookahead needs of the inference shapes alone: each one's duration
    in ms (None: unknown), the rows a decoder verifies in it (following_rows) and the
    tail rule's completion times, built on first use."""

    def __init__(self, inference: Sequence[Descriptor], costs: CostModel) -> None:
        self.inference = list(inference)
        self.ms = [_ms(costs, d) for d in self.inference]
        self.widths = [following_rows(d) for d in self.inference]  # static per shape
        self._costs = costs
        self._completion: CompletionTimes | None = None

    @property
    def completion(self) -> CompletionTimes:
        if self._completion is None:
            self._completion = CompletionTimes(self.inference, self._costs)
        return self._completion


class StateTables:
    """The lane contributions one decision needs, per following shape."""

    def __init__(
        self,
        population: Population,
        inference: Sequence[Descriptor],
        snapshots: Sequence[Descriptor],
        costs: CostModel,
        decision: Decision,
        policy: PolicyConfig,
    ) -> None:
        self.population = population
        self.inference = list(inference)
        self.vision: list[Descriptor] = []  # the vision stages a chain may pass through
        self.costs = costs
        self.decision = decision
        scale = math.exp(decision.log_scale)
        self.prices = TerminalPrices(policy.terminal_value * scale, decision.terminal_age_price)
        self.sigma = terminal_sigma_ms(snapshots, costs, len(population.terminal))
        self.max_rows = max((d.batch_capacity for d in self.inference), default=1)
        self._shapes: _Shapes | None = None

    @property
    def shapes(self) -> _Shapes:
        """The inference shapes' durations and completion times, memoised on the shapes
        and the estimates' version in a slot of their own (tails.completion_times' one
        slot belongs to the selector's list)."""
        if self._shapes is None:
            key = (tuple(map(id, self.inference)), self.costs.estimates_version)
            cached = self.costs.derived.get("state_shapes")
            if cached is not None and cached[0] == key:
                self._shapes = cached[1]
            else:
                self._shapes = _Shapes(self.inference, self.costs)
                self.costs.derived["state_shapes"] = (key, self._shapes)
        return self._shapes

    @property
    def completion(self) -> CompletionTimes:
        return self.shapes.completion

    @property
    def fastest_generation_ms(self) -> float | None:
        """The fastest measured decode or speculative shape's duration (None: none is
        measured): the last stage of a blocked decoder's fastest way to a delivery."""
        durations = self.shapes.ms
        found = [
            m
            for d, m in zip(self.inference, durations, strict=True)
            if m is not None and d.kind in (GraphKind.DECODE, GraphKind.SPECULATIVE)
        ]
        return min(found, default=None)

    def terminal_contributions(
        self, rows: Sequence[TerminalView], t_ms: float | None, total_ms: float | None
    ) -> list[TerminalContribution]:
        out = []
        for row in rows:
            prefix = terminal_lane_value(self.prices, self.sigma, row.age_ms, t_ms or 0.0)
            saved = 0.0
            if t_ms is not None and total_ms is not None:
                saved = saved_waiting(self.prices.age_price, t_ms, total_ms)
            out.append(TerminalContribution(prefix, prefix + saved))
        return out
