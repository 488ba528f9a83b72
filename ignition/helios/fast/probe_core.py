"""The acceptance-probe search's shape bounds over arrays (structure of arrays, numpy)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ignition.components.descriptor import Descriptor
from ignition.helios.decide.utility import Decision, LaneView


class ProbeBound:
    """Cheap upper bounds on any optimistic candidate's score (``learning``'s bound):
    a decoder's value in a graph of ceiling q is at most its value with q complete
    optimistic rows, so the B best such values, plus the best conceivable prompt row for
    a mixed graph, bound the graph's cohort value."""

    def __init__(
        self,
        views: Sequence[LaneView],
        fixed: Sequence[float],
        outputs: np.ndarray,
        prompts: Sequence[LaneView],
        decision: Decision,
        max_depth: int,
        max_batch: int,
        caps: Sequence[int] = (),
    ) -> None:
        """``outputs[i, q]``: view i's optimistic expected output with q rows; ``caps``:
        the ceilings the shapes will ask about (any other is computed when asked)."""
        self.decision = decision
        self.num_views = len(views)
        keep, limits, prices = [], [], []
        for i, v in enumerate(views):
            if v.remaining_output < 1:
                continue  # no output left: no lane (rounds.LaneTable.order)
            keep.append(i)
            limits.append(max(1, min(v.remaining_output, v.remaining_context, v.max_rows)))
            prices.append(v.prices.output_token)
        self._fixed = np.array([fixed[i] for i in keep], dtype=np.float64)
        self._prices = np.array(prices, dtype=np.float64)
        self._limits = np.array(limits, dtype=np.int64)
        self._outputs = outputs[keep] if keep else np.zeros((0, max_depth + 2))
        self._rows = np.arange(len(keep))
        self._tops: dict[int, list[float]] = {}
        deepest = max_depth + 1
        self._prepare([deepest, *caps])
        self.loose = self._tops[deepest][: max_batch + 1]
        running, self._sigmas = 0.0, [0.0]
        for s in sorted((v.sigma_ms or 0.0 for v in views), reverse=True):
            running += s
            self._sigmas.append(running)
        self.prompt_price = max((v.prices.prefill_token for v in prompts), default=0.0)
        # the finishing chunk's output token and first-delivery credit (issue 10b)
        self.prompt_output = max(
            (v.prices.output_token + v.prices.delivery for v in prompts), default=0.0
        )

    def _prepare(self, caps: Sequence[int]) -> None:
        """Per ceiling, sums[k] = the sum of the k best values fixed + price *
        outputs[min(cap, limit)], all ceilings in one pass."""
        wanted = [c for c in dict.fromkeys(caps) if c not in self._tops]
        if not wanted:
            return
        caps_array = np.array(wanted, dtype=np.int64)
        ceilings = np.minimum(self._limits[None, :], caps_array[:, None])
        values = self._fixed + self._prices * self._outputs[self._rows[None, :], ceilings]
        sums = np.zeros((len(wanted), len(self._rows) + 1))
        np.cumsum(-np.sort(-values, axis=1), axis=1, out=sums[:, 1:])  # left to right
        for c, row in zip(wanted, sums.tolist(), strict=True):
            self._tops[c] = row

    def _top(self, cap: int, batch: int) -> float:
        sums = self._tops.get(cap)
        if sums is None:
            self._prepare((cap,))
            sums = self._tops[cap]
        return sums[min(batch, len(sums) - 1)]

    def _score(
        self,
        batch_capacity: int,
        mixed_tokens: int | None,
        t_ms: float,
        value: float,
        lanes: int = 1,
    ):
        batch = min(batch_capacity, self.num_views)
        value += self.decision.age_value(self._sigmas[batch], 0.0, t_ms)
        if mixed_tokens is not None:  # every prompt lane may finish its prompt (issue 39)
            value += self.prompt_price * mixed_tokens + self.prompt_output * lanes
        return value / t_ms - self.decision.waiting_cost(t_ms)

    def bound(self, d: Descriptor, t_ms: float, score: float) -> float | None:
        """The bound on ``d``'s optimistic scores where it exceeds ``score``, else None."""
        mixed = d.prefill_capacity if d.is_mixed else None
        batch = min(d.batch_capacity, len(self.loose) - 1)
        lanes = d.prompt_lanes
        if self._score(d.batch_capacity, mixed, t_ms, self.loose[batch], lanes) <= score:
            return None
        found = self._score(
            d.batch_capacity, mixed, t_ms, self._top(d.verify_rows, d.batch_capacity), lanes
        )
        return found if found > score else None
