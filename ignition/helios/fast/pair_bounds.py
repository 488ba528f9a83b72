"""Upper bounds on a prerequisite's pair scores, one per following inference shape."""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import accumulate

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios.decide.state_rows import following_rows
from ignition.helios.decide.utility import Decision, LaneView, prompt_capacity
from ignition.helios.fast.lane_table import LaneTable, expected_outputs


def _top_sums(values: Sequence[float], length: int) -> list[float]:
    """Prefix sums of ``values`` in descending order, [0, largest, largest two, ...],
    padded with the total to ``length`` + 1 entries: entry m is the sum of the m largest
    values (all of them when fewer), for every m up to ``length``."""
    sums = [0.0, *accumulate(sorted(values, reverse=True))]
    return sums + [sums[-1]] * max(0, length + 1 - len(sums))


class DecoderRows:
    """Decoders a pair's following graph can serve, with each one's bound terms."""

    def __init__(
        self, views: Sequence[LaneView], decision: Decision, table: LaneTable | None = None
    ) -> None:
        """``table``: the decision's decoder table over the same ``views``."""
        self._table = table
        self.views = [v for v in views if v.remaining_output >= 1]
        self.bases: list[float] = []
        self.slopes: list[float] = []
        for v in self.views:
            value = v.prices.delivery
            slope = 0.0
            if v.sigma_ms is not None and decision.age_price != 0:
                slope = decision.age_price * v.sigma_ms
                value += slope * v.age_ms
            self.bases.append(value)
            self.slopes.append(slope)
        self._alpha = decision.alpha
        self._by_width: dict[int, list[float]] = {}
        self._terms: list[tuple[float, list[float], int, float]] = []
        self._depth = -1  # the deepest draft count the terms' outputs cover
        self._sums: dict[tuple[int, int], list[float]] = {}
        self._slope_sums: dict[int, list[float]] = {}

    def top_sums(self, rows: int, length: int) -> list[float]:
        """``_top_sums`` of the intercepts at ``rows`` (kept: a decision's ready decoders
        serve every prerequisite's bounds, and the next decision's while they hold)."""
        key = (rows, length)
        found = self._sums.get(key)
        if found is None:
            if self._table is not None:  # its order is the intercepts, best first
                ordered = [value for _, _, value in self._table.order(rows)]
                sums = [0.0, *accumulate(ordered)]
                found = sums + [sums[-1]] * max(0, length + 1 - len(sums))
            else:
                found = _top_sums(self.intercepts(rows), length)
            self._sums[key] = found
        return found

    def slope_sums(self, length: int) -> list[float]:
        found = self._slope_sums.get(length)
        if found is None:
            found = self._slope_sums[length] = _top_sums(self.slopes, length)
        return found

    def intercepts(self, rows: int) -> list[float]:
        found = self._by_width.get(rows)
        if found is None and self._table is not None:
            found = self._by_width[rows] = [value for _, _, value in self._table.order(rows)]
        if found is None:
            if rows - 1 > self._depth:
                self._terms = self._outputs(rows - 1)
            # decoder_rows(v, rows) = max(1, min(rows, limit)) inlined
            found = self._by_width[rows] = [
                price * outputs[max(1, min(rows, limit))] + base
                for price, outputs, limit, base in self._terms
            ]
        return found

    def _outputs(self, depth: int) -> list[tuple[float, list[float], int, float]]:
        """Per decoder: its output price, its expected output at every width (from the
        lane tables' memo: expected_output's sums, left to right, over its survivals or
        ``depth`` drafts if more, so a survival the view lacks adds 0 ** alpha, which
        only raises the bound where alpha is 0), its row limit (decoder_rows) and its
        base."""
        alpha = self._alpha
        terms = [
            (
                v.prices.output_token,
                expected_outputs(v.survivals, alpha, max(depth, len(v.survivals))),
                min(v.remaining_output, v.remaining_context, v.max_rows),
                base,
            )
            for v, base in zip(self.views, self.bases, strict=True)
        ]
        self._depth = min((len(t[1]) - 2 for t in terms), default=1 << 30)
        return terms


class PairBounds:
    """The bound tables of one prerequisite in one decision: the rows its pairs can
    serve (the ones it enables and the already-ready ones) and its terminal rows'
    first-stage contributions."""

    def __init__(
        self,
        enabled: Sequence[LaneView],
        ready_prompts: Sequence[LaneView],
        ready_decoders: DecoderRows,
        terminal_prefix: Sequence[float],
        terminal_age_price: float,
        prerequisite_rows: int,
        decision: Decision,
        max_rows: int,
    ) -> None:
        """``ready_decoders``: the decision's ready decoders, shared by every
        prerequisite's bounds; ``max_rows``: the largest batch capacity among the
        following shapes."""
        prompts = [*(v for v in enabled if not v.is_decoder), *ready_prompts]
        self._enabled = DecoderRows([v for v in enabled if v.is_decoder], decision)
        self._ready = ready_decoders
        self.has_enabled_decoder = any(v.is_decoder for v in enabled)
        self.has_enabled_prompt = any(not v.is_decoder for v in enabled)
        self.num_prompts = len(prompts)
        self._max_rows = max_rows
        self._by_width: dict[int, list[float]] = {}
        if self._enabled.views:
            self._slopes = _top_sums([*self._enabled.slopes, *ready_decoders.slopes], max_rows)
        else:  # newly ready rows are prompts: the ready decoders' sums alone
            self._slopes = ready_decoders.slope_sums(max_rows)
        bonus = [v.prices.output_token + v.prices.delivery for v in prompts]
        self._whole = _top_sums(
            [
                v.prices.prefill_token * max(0, v.remaining_prompt) + b
                for v, b in zip(prompts, bonus, strict=True)
            ],
            max_rows,
        )
        self._prices = _top_sums([v.prices.prefill_token for v in prompts], max_rows)
        self._bonus = _top_sums(bonus, max_rows)
        self.num_terminal = len(terminal_prefix)
        self._terminal = _top_sums(terminal_prefix, prerequisite_rows)[prerequisite_rows]
        self._terminal_rows = min(prerequisite_rows, len(terminal_prefix))
        self._age_price = terminal_age_price
        self._waiting = decision.waiting_coefficient

    def _intercepts_at(self, rows: int) -> list[float]:
        """Sums of the m largest decoder intercepts when each verifies ``rows`` rows."""
        sums = self._by_width.get(rows)
        if sums is None:
            if self._enabled.views:
                values = [*self._enabled.intercepts(rows), *self._ready.intercepts(rows)]
                sums = _top_sums(values, self._max_rows)
            else:
                sums = self._ready.top_sums(rows, self._max_rows)
            self._by_width[rows] = sums
        return sums

    def _decoders(self, m: int, span_ms: float, rows: int = 1) -> float:
        return self._intercepts_at(rows)[m] + span_ms * self._slopes[m]

    def _prompts(self, m: int, capacity: int) -> float:
        return min(self._whole[m], capacity * self._prices[m] + self._bonus[m])

    def following_value(self, following: Descriptor, span_ms: float) -> float | None:
        """At most what ``following``'s rows earn in any pair with this prerequisite
        over a ``span_ms`` lookahead; None where no pair of this shape exists."""
        rows = following.batch_capacity
        if following.kind is GraphKind.PREFILL:
            if not self.has_enabled_prompt:
                return None
            return self._prompts(rows, prompt_capacity(following))
        width = following_rows(following)
        if following.kind in (GraphKind.DECODE, GraphKind.SPECULATIVE):
            if not self.has_enabled_decoder:
                return None
            return self._decoders(rows, span_ms, width)
        if following.kind is GraphKind.MIXED:
            if not (self.has_enabled_decoder or self.has_enabled_prompt):
                return None
            value = self._decoders(rows, span_ms, width)
            if self.num_prompts:
                prompt = self._prompts(1, prompt_capacity(following))
                value = max(value, prompt + self._decoders(rows - 1, span_ms, width))
            return value
        return None

    def score(self, following: Descriptor, t_ms: float, f_ms: float) -> float | None:
        """An upper bound on the score of every pair of this prerequisite (``t_ms``)
        with ``following`` (``f_ms``); None where the pair cannot exist."""
        span = t_ms + f_ms
        value = self.following_value(following, span)
        if value is None:
            return None
        return self._rate(value, t_ms, span)

    def _rate(self, value: float, t_ms: float, span: float) -> float:
        if self._terminal_rows and span > t_ms:
            saved = self._age_price * (span * span - t_ms * t_ms) / 2.0
            value += self._terminal_rows * saved
        bound = (value + self._terminal) / span - span / 2.0 * self._waiting
        if self.num_terminal:  # the productive first-stage prefix, compared as well
            bound = max(bound, self._terminal / t_ms - t_ms / 2.0 * self._waiting)
        return bound

    def ranked(
        self,
        followings: Sequence[tuple[int, Descriptor, float]],
        t_ms: float,
        widths: Sequence[int] | None = None,
    ) -> list[tuple[float, int, Descriptor]]:
        """(-bound, position, following) of every pair that can exist among
        ``followings``, best bound first."""
        out = []
        whole, prices, bonus = self._whole, self._prices, self._bonus
        slopes = self._slopes
        prompt_ok, decoder_ok = self.has_enabled_prompt, self.has_enabled_decoder
        mixed_ok = prompt_ok or decoder_ok
        terminal, waiting = self._terminal, self._waiting / 2.0
        saving = self._terminal_rows * self._age_price / 2.0
        prefix = terminal / t_ms - t_ms * waiting if self.num_terminal else -math.inf
        t_squared = t_ms * t_ms
        prefill, mixed = GraphKind.PREFILL, GraphKind.MIXED
        decode, speculative = GraphKind.DECODE, GraphKind.SPECULATIVE
        for position, following, f_ms in followings:
            kind, rows = following.kind, following.batch_capacity
            span = t_ms + f_ms
            if kind is prefill:
                if not prompt_ok:
                    continue
                capacity = following.token_capacity
                value = capacity * prices[rows] + bonus[rows]
                if whole[rows] < value:
                    value = whole[rows]
            elif kind is mixed:
                if not mixed_ok:
                    continue
                intercepts = self._intercepts_at(
                    following_rows(following) if widths is None else widths[position]
                )
                value = intercepts[rows] + span * slopes[rows]
                if self.num_prompts:
                    capacity = following.prefill_capacity
                    prompt = min(whole[1], capacity * prices[1] + bonus[1])
                    beside = prompt + intercepts[rows - 1] + span * slopes[rows - 1]
                    if beside > value:
                        value = beside
            elif kind is decode or kind is speculative:
                if not decoder_ok:
                    continue
                intercepts = self._intercepts_at(
                    following_rows(following) if widths is None else widths[position]
                )
                value = intercepts[rows] + span * slopes[rows]
            else:
                continue
            if saving and span > t_ms:
                value += saving * (span * span - t_squared)
            bound = (value + terminal) / span - span * waiting
            out.append((-(bound if bound > prefix else prefix), position, following))
        out.sort()
        return out
