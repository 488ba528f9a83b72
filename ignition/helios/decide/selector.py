"""The selection by definition: every shape evaluated, in the seed's order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ignition.components.descriptor import Descriptor
from ignition.helios.decide import mixed_width
from ignition.helios.decide.learning import choose_probe
from ignition.helios.decide.policy import (
    CatalogIndex,
    Population,
    Tables,
    active_descriptors,
    all_candidates,
    build_tables,
    candidates_for,
    select,
)
from ignition.helios.decide.projection import build_population
from ignition.helios.decide.selection import (
    Selection,
    SelectionState,
    execution_class,
    page_feasible,
)
from ignition.helios.decide.state_choice import state_candidates
from ignition.helios.decide.utility import Candidate, Decision


@dataclass(frozen=True)
class Evaluation:
    """One decision's population and every shape's best candidates (inference shapes,
    dominated ones pruned, and state shapes)."""

    population: Population
    decision: Decision
    tables: Tables
    shapes: list[tuple[Descriptor, bool]]
    inference: list[Candidate]
    states: list[Candidate]


class Exhaustive:
    """The definition as a selector (``decide.selection.Selector``). Its one cache is the
    catalog index, a static function of the catalog."""

    def __init__(self) -> None:
        self._index: tuple[Sequence[Descriptor], CatalogIndex] | None = None

    def _catalog_index(self, descriptors: Sequence[Descriptor]) -> CatalogIndex:
        if self._index is None or self._index[0] is not descriptors:
            self._index = (descriptors, CatalogIndex(descriptors))
        return self._index[1]

    def evaluate(self, s: SelectionState) -> Evaluation:
        """Steps 1 and 2: the population and every shape's candidates."""
        population, decision = build_population(
            s.requests,
            s.queue,
            s.descriptors,
            s.costs,
            s.policy,
            s.start_ns,
            s.max_depth,
            s.waiting_for_slot,
        )
        index = self._catalog_index(s.descriptors)
        tables = build_tables(index, population, decision, s.max_depth)
        shapes = active_descriptors(index, population, s.policy.generation_twin)
        inference = all_candidates(shapes, tables, s.costs, decision, s.now_ns, s.speculation)
        states = state_candidates(
            (*s.descriptors, *s.state_descriptors),
            population,
            s.costs,
            decision,
            s.policy,
            s.now_ns,
        )
        return Evaluation(population, decision, tables, shapes, inference, states)

    def select(self, s: SelectionState) -> Selection | None:
        e = self.evaluate(s)
        population, decision, tables, shapes = e.population, e.decision, e.tables, e.shapes
        candidates, states = e.inference + e.states, e.states
        best = select(candidates)
        if s.policy.mixed_width:  # decide/mixed_width.py

            def evaluate(d: Descriptor, decode_only: bool) -> list[Candidate]:
                return candidates_for(
                    d, tables, s.costs, decision, s.now_ns, s.speculation, decode_only
                )

            best = mixed_width.widen(best, shapes, evaluate, s.page_shortfall)
        winner = page_feasible(best, states, s.page_shortfall)
        if winner is None:
            return None
        return execution_class(
            winner,
            decision,
            s,
            lambda: candidates,
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
            ),
        )
