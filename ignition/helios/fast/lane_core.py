"""Decoder lane values of one decision as arrays (structure of arrays, numpy)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ignition.helios.decide.utility import LaneView


def _decodable_columns(views: Sequence[LaneView]) -> tuple[list, list, list, list, list, list]:
    """(view index, row limit, output-token price, last served seq, slot, sigma) of every
    view that can still decode: the columns both table kinds are built from."""
    index, limits, prices, seqs, slots, sigmas = [], [], [], [], [], []
    for i, v in enumerate(views):
        remaining = v.remaining_output
        if remaining < 1:
            continue  # cannot decode: in no order
        index.append(i)
        limits.append(max(1, min(remaining, v.remaining_context, v.max_rows)))
        prices.append(float(v.prices.output_token))
        seqs.append(v.last_served_seq)
        slots.append(v.handle.slot)
        sigmas.append(v.sigma_ms)
    return index, limits, prices, seqs, slots, sigmas


class _LaneOrders:
    """What both table kinds derive from their ``head`` and ``positive_sums``."""

    size: int
    _sums: dict[int, list[float]]

    def head(self, cap: int, length: int) -> list[tuple[int, int, float]]:
        raise NotImplementedError

    def positive_sums(self, caps: Sequence[int]) -> None:
        raise NotImplementedError

    def order(self, cap: int) -> list[tuple[int, int, float]]:
        """``LaneTable.order``: (view index, ceiling, value), best value first, then less
        recently served, then lower slot (slots are unique, so the order is total)."""
        return self.head(cap, self.size)

    def positive_sum(self, cap: int, max_lanes: int) -> float:
        """The positive values among the best ``max_lanes`` at ``cap``, summed."""
        sums = self._sums.get(cap)
        if sums is None:
            self.positive_sums((cap,))
            sums = self._sums[cap]
        return sums[min(max_lanes, len(sums) - 1)]


class LaneArrays(_LaneOrders):
    """Every decodable view's value at each row ceiling, and the orders and positive
    prefix sums the cohort search and the score bounds read."""

    def __init__(
        self,
        views: Sequence[LaneView],
        fixed: Sequence[float],
        outputs: Sequence[Sequence[float]],
    ) -> None:
        index, limits, prices, seqs, slots, sigmas = _decodable_columns(views)
        self.size = len(index)
        self._index = np.array(index, dtype=np.int64)
        self._limits = np.array(limits, dtype=np.int64)
        self._fixed = np.array([fixed[i] for i in index], dtype=np.float64)
        self._prices = np.array(prices, dtype=np.float64)
        self._outputs = np.array([outputs[i] for i in index], dtype=np.float64) if index else None
        self._seqs = np.array(seqs, dtype=np.int64)
        self._slots = np.array(slots, dtype=np.int64)
        self._rows = np.arange(self.size)
        self._has_sigma = np.array([x is not None for x in sigmas], dtype=bool)
        self._sigmas = np.array([0.0 if x is None else x for x in sigmas], dtype=np.float64)
        self._sums: dict[int, list[float]] = {}
        self._values: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._ranked: dict[int, np.ndarray] = {}

    def with_outputs(self, outputs: np.ndarray) -> LaneArrays:
        """These views' arrays with other expected outputs (``outputs[i, q]`` for view
        index i): the probe search's optimistic table shares every other column, and its
        fixed values too (they depend only on the views and the decision)."""
        twin = LaneArrays.__new__(LaneArrays)
        twin.__dict__.update(self.__dict__)
        twin._outputs = outputs[self._index] if self.size else None
        twin._sums, twin._values, twin._ranked = {}, {}, {}
        return twin

    def values(self, cap: int) -> tuple[np.ndarray, np.ndarray]:
        """(ceilings, values) of every decodable view at row ceiling ``cap``."""
        found = self._values.get(cap)
        if found is None:
            # = max(1, min(cap, remaining, context)), limits being max(1, min(remaining, context))
            ceilings = np.minimum(self._limits, max(1, cap))
            values = self._fixed + self._prices * self._outputs[self._rows, ceilings]
            found = self._values[cap] = (ceilings, values)
        return found

    def head(self, cap: int, length: int) -> list[tuple[int, int, float]]:
        """The first ``length`` entries of ``order(cap)``, without converting the rest."""
        if not self.size or length <= 0:
            return []
        ceilings, values = self.values(cap)
        ranked = self._ranked.get(cap)
        if ranked is None:
            ranked = self._ranked[cap] = np.lexsort((self._slots, self._seqs, -values))
        ranked = ranked[:length]
        return list(
            zip(
                self._index[ranked].tolist(),
                ceilings[ranked].tolist(),
                values[ranked].tolist(),
                strict=True,
            )
        )

    def best_per_row(
        self, cap: int, length: int, age_price: float, duration_ms: float
    ) -> list[int]:
        """View indices of the ``length`` best by value per target row at ``cap``, the
        value including the age continuation (``LaneTable._leaders``' third ordering):
        key (-(value + age) / ceiling, seq, slot), each term in the Python order."""
        if not self.size or length <= 0:
            return []
        ceilings, values = self.values(cap)
        if age_price == 0:
            age = np.zeros(self.size)
        else:
            age = np.where(self._has_sigma, age_price * self._sigmas * (0.0 + duration_ms), 0.0)
        keys = -(values + age) / ceilings
        ranked = np.lexsort((self._slots, self._seqs, keys))[:length]
        return self._index[ranked].tolist()

    def positive_sums(self, caps: Sequence[int]) -> None:
        """For each cap, sums[k] = the sum of the positive values among the k best (the
        score bounds' decoder term), computed for all ``caps`` in one pass."""
        wanted = [c for c in dict.fromkeys(caps) if c not in self._sums]
        if not wanted:
            return
        if not self.size:
            for c in wanted:
                self._sums[c] = [0.0]
            return
        caps = np.array([max(1, c) for c in wanted], dtype=np.int64)
        ceilings = np.minimum(self._limits[None, :], caps[:, None])
        values = self._fixed + self._prices * self._outputs[self._rows[None, :], ceilings]
        best_first = -np.sort(-values, axis=1)
        sums = np.zeros((len(wanted), self.size + 1))
        np.cumsum(np.where(best_first > 0, best_first, 0.0), axis=1, out=sums[:, 1:])
        for c, row in zip(wanted, sums.tolist(), strict=True):
            self._sums[c] = row


SMALL_TABLE = 16
"""Below this many views a decision's lanes stay Python lists (``LaneLists``): with a
handful of decoders numpy's per-call overhead costs more than the loops it replaces
(1 request: +15 us per plan() measured in session 3, ``python benchmarks/helios_plan.py``)."""


def lane_arrays(
    views: Sequence[LaneView], fixed: Sequence[float], outputs: Sequence[Sequence[float]]
) -> LaneArrays | LaneLists:
    """``LaneArrays`` for many views, ``LaneLists`` for a few; both give the same floats."""
    if len(views) < SMALL_TABLE:
        return LaneLists(views, fixed, outputs)
    return LaneArrays(views, fixed, outputs)


class LaneLists(_LaneOrders):
    """``LaneArrays``' interface in plain Python, for small tables."""

    def __init__(
        self,
        views: Sequence[LaneView],
        fixed: Sequence[float],
        outputs: Sequence[Sequence[float]],
    ) -> None:
        index, limits, prices, seqs, slots, sigmas = _decodable_columns(views)
        self.size = len(index)
        self._index = index
        self._limits = limits
        self._fixed = [float(fixed[i]) for i in index]
        self._prices = prices
        self._outputs = [[float(x) for x in outputs[i]] for i in index]
        self._seqs = seqs
        self._slots = slots
        self._sigmas = sigmas
        self._sums: dict[int, list[float]] = {}
        self._values: dict[int, tuple[list[int], list[float]]] = {}
        self._ranked: dict[int, list[int]] = {}

    def with_outputs(self, outputs: np.ndarray) -> LaneLists:
        """As ``LaneArrays.with_outputs`` (``outputs[i, q]`` for view index i)."""
        twin = LaneLists.__new__(LaneLists)
        twin.__dict__.update(self.__dict__)
        twin._outputs = [outputs[i].tolist() for i in self._index]
        twin._sums, twin._values, twin._ranked = {}, {}, {}
        return twin

    def values(self, cap: int) -> tuple[list[int], list[float]]:
        found = self._values.get(cap)
        if found is None:
            top = max(1, cap)
            ceilings = [min(limit, top) for limit in self._limits]
            values = [
                f + p * out[c]
                for f, p, out, c in zip(
                    self._fixed, self._prices, self._outputs, ceilings, strict=True
                )
            ]
            found = self._values[cap] = (ceilings, values)
        return found

    def head(self, cap: int, length: int) -> list[tuple[int, int, float]]:
        if not self.size or length <= 0:
            return []
        ceilings, values = self.values(cap)
        ranked = self._ranked.get(cap)
        if ranked is None:
            seqs, slots = self._seqs, self._slots
            ranked = self._ranked[cap] = sorted(
                range(self.size), key=lambda j: (-values[j], seqs[j], slots[j])
            )
        return [(self._index[j], ceilings[j], values[j]) for j in ranked[:length]]

    def best_per_row(
        self, cap: int, length: int, age_price: float, duration_ms: float
    ) -> list[int]:
        if not self.size or length <= 0:
            return []
        ceilings, values = self.values(cap)
        keys = []
        for j in range(self.size):
            sigma = self._sigmas[j]
            age = 0.0
            if age_price != 0 and sigma is not None:
                age = age_price * sigma * (0.0 + duration_ms)
            keys.append(-(values[j] + age) / ceilings[j])
        seqs, slots = self._seqs, self._slots
        ranked = sorted(range(self.size), key=lambda j: (keys[j], seqs[j], slots[j]))
        return [self._index[j] for j in ranked[:length]]

    def positive_sums(self, caps: Sequence[int]) -> None:
        for c in caps:
            if c in self._sums:
                continue
            _, values = self.values(max(1, c))
            row = [0.0]
            total = 0.0
            for value in sorted(values, reverse=True):
                total += value if value > 0 else 0.0
                row.append(total)
            self._sums[c] = row
