"""The decision's normalizers, vectorised across the catalog with numpy."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios.state.cost import CostEntry, CostModel
from ignition.helios.state.prompt_starts import BOUNDED_RULES, PromptStarts
from ignition.helios.state.rates import Normalizers

VECTOR_RULES = ("balanced", "whole-prompt", "generation", "normalizer")


class CatalogArrays:
    """One catalog's per-program constants and cost entries, built once per catalog."""

    def __init__(self, descriptors: Sequence[Descriptor], costs: CostModel) -> None:
        self.descriptors = descriptors  # held so the id used as a key stays unique
        self.entries: list[CostEntry] = [costs.entry(d) for d in descriptors]
        kinds = [d.kind for d in descriptors]
        self.batch = np.array([d.batch_capacity for d in descriptors], dtype=np.int64)
        self.token_capacity = np.array([d.token_capacity for d in descriptors], dtype=np.int64)
        self.prefill_capacity = np.array([d.prefill_capacity for d in descriptors], dtype=np.int64)
        self.is_prefill = np.array([k is GraphKind.PREFILL for k in kinds], dtype=bool)
        self.is_mixed = np.array([k is GraphKind.MIXED for k in kinds], dtype=bool)
        decode_like = (GraphKind.DECODE, GraphKind.SPECULATIVE)
        self.is_decode_like = np.array([k in decode_like for k in kinds], dtype=bool)
        self.is_generation = self.is_decode_like | self.is_mixed
        self._useful: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._rows: dict[int, np.ndarray] = {}

    def useful(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``service.useful_tokens`` of every program at min(B, k) rows, and the same
        with zeros outside decode and speculative programs."""
        found = self._useful.get(k)
        if found is None:
            rows = np.minimum(self.batch, k)
            every = np.where(
                self.is_prefill,
                rows * self.token_capacity,
                np.where(
                    self.is_mixed,
                    self.prefill_capacity + (rows - 1),
                    np.where(self.is_decode_like, rows, 0),
                ),
            )
            found = self._useful[k] = (every, np.where(self.is_decode_like, every, 0))
        return found

    def durations_ms(self) -> tuple[np.ndarray, np.ndarray]:
        """Measured estimates in ms, and the same outside generation programs."""
        ns = np.array([e.estimate_ns for e in self.entries], dtype=np.int64)
        t = ns / 1e6
        t[ns <= 0] = np.inf
        return t, np.where(self.is_generation, t, np.inf)

    def token_normalizers(self, t_ms: np.ndarray, num_streams: int) -> tuple:
        """The token normalizer over every program and over decode and speculative ones:
        max of useful / (k * t) where positive, else None."""
        if not t_ms.size:
            return None, None
        k = max(1, num_streams)
        every, decode_like = self.useful(k)
        kt = k * t_ms
        high = float((every / kt).max())
        low = float((decode_like / kt).max())
        return (high if high > 0 else None), (low if low > 0 else None)

    def prompt_starts(
        self, t_ms: np.ndarray, num_streams: int, generation: float | None, start: float | None
    ) -> PromptStarts | None:
        """``prompt_starts.prompt_starts`` over ``service.graph_shares``, vectorised: the
        same sort order and the same IEEE operations, so the same table."""
        if generation is None or start is None:
            return None
        k = max(1, num_streams)
        every, _ = self.useful(k)
        keep = (every > 0) & np.isfinite(t_ms)
        if not keep.any():
            return None
        shares, t = every[keep] / k, t_ms[keep]
        order = np.lexsort((t, shares))  # by share, then duration: sorted((s, t))
        shares, t = shares[order], t[order]
        rates = shares / t
        below = np.concatenate(([0.0], np.maximum.accumulate(rates)))
        fastest = np.concatenate((np.minimum.accumulate(t[::-1])[::-1], [math.inf]))
        full = float(shares[int(np.argmax(rates))])
        return PromptStarts(
            tuple(shares.tolist()),
            tuple(below.tolist()),
            tuple(fastest.tolist()),
            full,
            generation,
            start,
        )

    def reference_interval_ms(
        self, t_generation: np.ndarray, num_streams: int, family_size: int | None = None
    ) -> float | None:
        k = num_streams if family_size is None else family_size
        if num_streams <= 0 or k <= 0 or not t_generation.size:
            return None
        rows = self._rows.get(k)
        if rows is None:
            rows = self._rows[k] = np.minimum(self.batch, k)
        best = float((t_generation / rows).min())
        return None if best == math.inf else num_streams * best


def catalog_arrays(descriptors: Sequence[Descriptor], costs: CostModel) -> CatalogArrays:
    cached = costs.derived.get("catalog_arrays")
    if cached is not None and cached[0] is descriptors:
        return cached[1]
    arrays = CatalogArrays(descriptors, costs)
    costs.derived["catalog_arrays"] = (descriptors, arrays)
    return arrays


def vector_normalizers(
    arrays: CatalogArrays,
    num_live: int,
    num_decoders: int,
    families: Mapping[str, int],
    rule: str,
) -> Normalizers:
    """``service.normalizers`` with the newcomer start ``rule`` applied, as
    ``projection.current_normalizers`` builds them on the Python path."""
    t, t_generation = arrays.durations_ms()
    total = max(1, num_decoders)
    token_rate, low = arrays.token_normalizers(t, num_live)
    sigma = arrays.reference_interval_ms(t_generation, total)
    by_family: dict[str, Normalizers] = {}
    if len(families) > 1:
        for family, size in families.items():
            s = arrays.reference_interval_ms(t_generation, total, size)
            by_family[family] = Normalizers(token_rate, None if s is None else 1.0 / s, s)
    high = token_rate  # the token normalizer at num_live streams
    if low is None:
        low = high
    if rule == "normalizer":
        start = high
    elif rule == "generation":
        start = low
    elif low is None or high is None:
        start = high if low is None else low
    else:
        start = math.sqrt(low * high)
    starts = None
    if start is not None:
        token_rate = start
        if rule in BOUNDED_RULES:
            starts = arrays.prompt_starts(t, num_live, low, start)
        by_family = {
            f: Normalizers(start, n.delivery_rate, n.sigma_ms, prompt_starts=starts)
            for f, n in by_family.items()
        }
    return Normalizers(
        token_rate=token_rate,
        delivery_rate=None if sigma is None else 1.0 / sigma,
        sigma_ms=sigma,
        by_family=by_family,
        prompt_starts=starts,
    )
