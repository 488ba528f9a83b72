"""One probe search's optimistic decoder values as arrays (structure of arrays, numpy).

Every completion ages the participants' acceptance histories, which clears their
memoised optimistic estimates, so each probe search recomputed every decoder's
optimistic survivals and outputs in Python (a square root per depth, then a running
minimum and a running sum) and sorted the bound's values per ceiling in Python too.
Here every decoder and depth is computed at once with the same IEEE operations in the
same order (running minima and sums accumulate left to right, as the loops did), so
the survivals, outputs and bounds are bit-identical to the Python path, which stays
the reference (``PrefixHistory.optimistic_outputs``; tests/helios/reference_selector).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ignition.helios.speculation import OPTIMISM_LOG, PrefixHistory
from ignition.helios.utility import Decision, LaneView


def optimistic_arrays(
    histories: Sequence[PrefixHistory], max_depth: int, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """(survivals, outputs): survivals[i, d - 1] is ``histories[i]``'s optimistic s_d
    (``PrefixHistory.optimistic_survivals``); outputs[i, q] its optimistic expected output
    with q target rows (``optimistic_outputs``; column 0 unused, as there)."""
    n = len(histories)
    means, weights = [], []
    for history in histories:
        m, w = history.estimates(max_depth)
        means += m
        weights += w
    mean = np.array(means, dtype=np.float64).reshape(n, max_depth)
    weight = np.array(weights, dtype=np.float64).reshape(n, max_depth)
    # min(1, mean + sqrt(ln 20 / (2 * max(weight, 1e-9)))), then the running ceiling
    # min(ceiling, max(0, x)) from 1: every operation correctly rounded, as in Python.
    optimistic = np.minimum(1.0, mean + np.sqrt(OPTIMISM_LOG / (2.0 * np.maximum(weight, 1e-9))))
    survivals = np.minimum.accumulate(np.maximum(optimistic, 0.0), axis=1)
    if alpha == 1.0:
        powered = survivals  # s ** 1.0 is s exactly
    else:  # Python's own power, element by element, keeps the reference's rounding
        powered = np.array(
            [s**alpha for s in survivals.ravel().tolist()], dtype=np.float64
        ).reshape(n, max_depth)
    outputs = np.empty((n, max_depth + 2), dtype=np.float64)
    outputs[:, 0] = 0.0
    outputs[:, 1] = 1.0
    outputs[:, 2:] = powered
    np.cumsum(outputs[:, 1:], axis=1, out=outputs[:, 1:])  # total += s, left to right
    return survivals, outputs


class ProbeBound:
    """Cheap upper bounds on any optimistic candidate's score (``learning``'s bound):
    a decoder's value in a graph of ceiling q is at most its value with q complete
    optimistic rows, so the B best such values, plus the best conceivable prompt row for
    a mixed graph, bound the graph's cohort value. A loose bound at each lane's deepest
    ceiling rules out most shapes; the rest get the bound at their own ceiling, every
    ceiling's sorted prefix sums made in one vectorised step when first asked."""

    def __init__(
        self,
        views: Sequence[LaneView],
        fixed: Sequence[float],
        outputs: np.ndarray,
        prompts: Sequence[LaneView],
        decision: Decision,
        max_depth: int,
        max_batch: int,
    ) -> None:
        self.decision = decision
        self.num_views = len(views)
        keep, limits, prices = [], [], []
        for i, v in enumerate(views):
            limit = min(v.remaining_output, v.remaining_context)
            if limit >= 1:
                keep.append(i)
                limits.append(limit)
                prices.append(v.prices.output_token)
        self._fixed = np.array([fixed[i] for i in keep], dtype=np.float64)
        self._prices = np.array(prices, dtype=np.float64)
        self._limits = np.array(limits, dtype=np.int64)
        self._outputs = outputs[keep] if keep else np.zeros((0, max_depth + 2))
        self._rows = np.arange(len(keep))
        deepest = self._sorted_values(max_depth + 1)[:max_batch]
        self.loose = [0.0, *np.cumsum(deepest).tolist()]
        running, self._sigmas = 0.0, [0.0]
        for s in sorted((v.sigma_ms or 0.0 for v in views), reverse=True):
            running += s
            self._sigmas.append(running)
        self.prompt_price = max((v.prices.prefill_token for v in prompts), default=0.0)
        self.prompt_output = max((v.prices.output_token for v in prompts), default=0.0)
        self._tops: dict[int, list[float]] = {}

    def _sorted_values(self, cap: int) -> np.ndarray:
        """fixed + price * outputs[min(cap, limit)] per decodable lane, best first."""
        values = (
            self._fixed + self._prices * self._outputs[self._rows, np.minimum(self._limits, cap)]
        )
        return -np.sort(-values)

    def _top(self, cap: int, batch: int) -> float:
        sums = self._tops.get(cap)
        if sums is None:
            sums = self._tops[cap] = [0.0, *np.cumsum(self._sorted_values(cap)).tolist()]
        return sums[min(batch, len(sums) - 1)]

    def _score(self, batch_capacity: int, mixed_tokens: int | None, t_ms: float, value: float):
        batch = min(batch_capacity, self.num_views)
        value += self.decision.age_value(self._sigmas[batch], 0.0, t_ms)
        if mixed_tokens is not None:
            value += self.prompt_price * mixed_tokens + self.prompt_output
        return value / t_ms - self.decision.waiting_cost(t_ms)

    def bound(self, d, t_ms: float, score: float) -> float | None:
        """The bound on ``d``'s optimistic scores where it exceeds ``score``, else None."""
        mixed = d.prefill_capacity if d.is_mixed else None
        batch = min(d.batch_capacity, len(self.loose) - 1)
        if self._score(d.batch_capacity, mixed, t_ms, self.loose[batch]) <= score:
            return None
        cap = min(d.proposal_depth + 1, d.token_capacity)
        found = self._score(d.batch_capacity, mixed, t_ms, self._top(cap, d.batch_capacity))
        return found if found > score else None
