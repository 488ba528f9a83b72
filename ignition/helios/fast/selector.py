"""The selection plan() runs: ``decide.selector.Exhaustive``'s choice, found without
evaluating what cannot win."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ignition.components.descriptor import Descriptor
from ignition.helios.decide import mixed_width
from ignition.helios.decide.policy import active_descriptors, select
from ignition.helios.decide.selection import (
    Selection,
    SelectionState,
    execution_class,
    page_feasible,
)
from ignition.helios.decide.state_choice import state_candidates
from ignition.helios.decide.utility import Candidate
from ignition.helios.fast.bounds import (
    bounded_candidates,
    evaluate_shape,
    largest_bound,
    stale_alternative,
)
from ignition.helios.fast.catalog_index import CatalogIndex
from ignition.helios.fast.lane_table import LaneTable
from ignition.helios.fast.learning import choose_probe
from ignition.helios.fast.pair_bounds import DecoderRows
from ignition.helios.fast.projection import ProjectionCache, build_population
from ignition.helios.fast.state_search import StateSearch
from ignition.helios.fast.tables import TableCache, Tables


class Bounded:
    """The bounded search as a selector (``decide.selection.Selector``), with the caches
    it keeps between decisions of one scheduler."""

    def __init__(self) -> None:
        self._index: tuple[Sequence[Descriptor], CatalogIndex] | None = None
        self._projection = ProjectionCache()
        self._tables = TableCache()
        self._ready: tuple[LaneTable, DecoderRows] | None = None

    def _catalog_index(self, descriptors: Sequence[Descriptor]) -> CatalogIndex:
        if self._index is None or self._index[0] is not descriptors:
            self._index = (descriptors, CatalogIndex(descriptors))
        return self._index[1]

    def _ready_rows(self, tables: Tables) -> DecoderRows:
        """The ready decoders' pair-bound terms, kept while the table cache hands out the
        same decoder table (the same views under an equal decision)."""
        if self._ready is None or self._ready[0] is not tables.decoders:
            table = tables.decoders
            self._ready = (table, DecoderRows(table.views, table.decision, table))
        return self._ready[1]

    def select(self, s: SelectionState) -> Selection | None:
        population, decision = build_population(
            s.requests,
            s.queue,
            s.descriptors,
            s.costs,
            s.policy,
            s.start_ns,
            s.max_depth,
            self._projection,
            s.waiting_for_slot,
        )
        index = self._catalog_index(s.descriptors)
        tables = self._tables.tables(index, population, decision, s.max_depth)
        decision = tables.decision  # equal to the one built; the tables memoise for it
        shapes = active_descriptors(index, population, s.policy.generation_twin)
        state_inputs = (
            (*s.descriptors, *s.state_descriptors),
            population,
            s.costs,
            decision,
            s.policy,
            s.now_ns,
        )
        search = StateSearch(*state_inputs, self._ready_rows(tables))
        hint = None  # the inference shapes' largest bound, only where a pair could use it
        if search.has_ranked_pairs:
            hint = largest_bound(shapes, tables, s.costs, decision, s.now_ns)
        provisional = search.provisional(hint)
        # what bounded_candidates and stale_alternative both read, in their order
        inputs = (shapes, tables, s.costs, decision, s.now_ns, s.speculation, index)
        inference = bounded_candidates(
            *inputs,
            provisional,
            bound_stale=True,  # timing refresh finds its stale alternative below
        )
        floor = max((c.score for c in inference if not c.is_indeterminate), default=-math.inf)
        states = search.candidates(floor)

        def chosen(pool: list[Candidate]) -> Candidate | None:
            best = select(pool)
            if not s.policy.mixed_width:
                return best

            def evaluate(d: Descriptor, decode_only: bool) -> list[Candidate]:
                return evaluate_shape((d, decode_only), *inputs[1:6])

            return mixed_width.widen(best, shapes, evaluate, s.page_shortfall)  # decide/

        winner = chosen(inference + states)
        if winner is not None and not search.is_empty and s.page_shortfall(winner) > 0:
            states = state_candidates(*state_inputs)
            winner = page_feasible(chosen(inference + states), states, s.page_shortfall)
        if winner is None:
            return None

        def stale_pool() -> list[Candidate]:
            decided, alternative = stale_alternative(*inputs, winner)
            if decided:
                pool = [alternative] if alternative is not None else []
            else:  # a tie inside the oldest key: every stale shape, in the list order
                pool = bounded_candidates(*inputs, provisional)
            return [*pool, *states]

        return execution_class(
            winner,
            decision,
            s,
            stale_pool,
            lambda: choose_probe(
                winner,
                shapes,
                population,
                tables,
                s.costs,
                decision,
                s.now_ns,
                s.speculation,
                s.max_depth,
                s.history_of,
                any_probe=not s.queue.is_empty,
            ),
        )
