"""The proposal sources a request may name, and the ones it gets.

A request names its sources by its speculative method (``--speculative-method``, the
request's ``speculative_method`` field; vLLM's speculative_config "method"): a registered
source's name ("mtp", "ngram", or one a deployment registers) or a choice among several
("both": Helios picks the head's drafts or a copy for every round, decide/sources.py). A
grammar-constrained request verifies its grammar's forced drafts whatever its method says.
Adding a source is its module plus one :func:`register` call.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ignition.helios import DraftSource
from ignition.runtime.proposals.copy_drafts import COPIES, CopyDrafts
from ignition.runtime.proposals.copy_proposals import PromptLookup
from ignition.runtime.proposals.grammar_drafts import GrammarDrafts
from ignition.runtime.proposals.head import HeadDrafts
from ignition.runtime.proposals.source import ProposalSource
from ignition.runtime.requests.errors import RequestError

_SOURCES: dict[DraftSource, ProposalSource] = {}
_METHODS: dict[str, tuple[DraftSource, ...]] = {}  # spelling -> sources, preferred first


def register(source: ProposalSource, named: bool = True) -> None:
    """Make ``source`` available; ``named``: a request names it by its own name as its
    speculative method (the grammar's is chosen by the grammar field instead)."""
    _SOURCES[source.source] = source
    if named:
        _METHODS[source.source.name] = (source.source,)


def register_choice(method: str, sources: Sequence[DraftSource]) -> None:
    """Name a per-round choice among registered sources (ties go to the first)."""
    missing = [s.name for s in sources if s not in _SOURCES]
    if len(sources) < 2 or missing:
        raise ValueError(f"choice {method!r}: needs two or more registered sources ({missing})")
    _METHODS[method] = tuple(sources)


def unregister(method: str) -> None:
    """Forget a method and, if no other method names them, its sources (tests)."""
    gone = _METHODS.pop(method, ())
    named = {s for sources in _METHODS.values() for s in sources}
    for source in gone:
        if source not in named:
            _SOURCES.pop(source, None)


def methods() -> tuple[str, ...]:
    """Every speculative method a request may name, in registration order."""
    return tuple(_METHODS)


def check_method(method: str) -> None:
    if method not in _METHODS:
        raise RequestError(
            f"speculative_method = {method!r}: must be one of {', '.join(_METHODS)}"
        )


def sources_for(method: str, constrained: bool) -> tuple[ProposalSource, ...]:
    """The sources of a request's rounds, preferred first (more than one: Helios chooses
    per round); a constrained request's grammar decides for it."""
    if constrained:
        return (_GRAMMAR,)
    check_method(method)
    return tuple(_SOURCES[s] for s in _METHODS[method])


class Proposals:
    """An engine's sources by Helios's name: the registered ones, prompt lookup under the
    server's search (``--prompt-lookup-max/-min``)."""

    def __init__(self, lookup: PromptLookup | None = None) -> None:
        self._lookup = CopyDrafts(lookup or PromptLookup())

    def get(self, source: DraftSource) -> ProposalSource:
        if source == COPIES:
            return self._lookup
        return _SOURCES[source]

    def sources_for(self, method: str, constrained: bool) -> tuple[ProposalSource, ...]:
        return tuple(self.get(s.source) for s in sources_for(method, constrained))


def _register_builtins(sources: Iterable[ProposalSource]) -> None:
    for source in sources:
        register(source, named=source is not _GRAMMAR)
    register_choice("both", (HeadDrafts().source, COPIES))


_GRAMMAR = GrammarDrafts()
_register_builtins((HeadDrafts(), CopyDrafts(), _GRAMMAR))
