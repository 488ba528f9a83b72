"""Helios's hot reads stay on CPython's fast paths (the plan() benchmark's regression of
issue 41: scripts/scheduling_sim/plan_bench.py, docs/helios.md 'Attribute reads')."""

from __future__ import annotations

import importlib
import sys
import pkgutil
from dataclasses import replace
from enum import Enum

import ignition.helios
from ignition.helios.state.acceptance import AcceptanceTracker, PopulationPrior
from ignition.helios.types import HEAD_DRAFTS, DraftSource, RequestSpec

IMMUTABLE_TYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE


def helios_classes() -> list[type]:
    for info in pkgutil.walk_packages(ignition.helios.__path__, "ignition.helios."):
        importlib.import_module(info.name)
    found = []
    for name, module in sys.modules.items():
        if name.startswith("ignition.helios"):
            found += [
                c for c in vars(module).values() if isinstance(c, type) and c.__module__ == name
            ]
    from ignition.components.descriptor import Descriptor  # read in every candidate

    return [*found, Descriptor]


def test_no_helios_class_attribute_is_an_instance_of_a_python_class():
    """CPython 3.11 specializes no read of an instance attribute whose class attribute of
    that name is an instance of a Python-defined class: a dataclass default such as
    HEAD_DRAFTS or an enum member, a cached_property. Such defaults go through
    field(default_factory=...), derived values are set in __post_init__."""
    offending = [
        f"{cls.__module__}.{cls.__qualname__}.{name}: {type(value).__name__}"
        for cls in helios_classes()
        if not issubclass(cls, Enum)
        for name, value in vars(cls).items()
        if not name.startswith("__")
        and name != "_abc_impl"
        and not type(value).__flags__ & IMMUTABLE_TYPE
    ]
    assert offending == []


class UnhashableSource(DraftSource):
    def __hash__(self) -> int:
        raise AssertionError("a history lookup hashed the DraftSource")


def test_a_history_lookup_hashes_the_source_name_not_the_draft_source():
    """A DraftSource hashes in Python; plan() looks a history up ~80 times per call at 64
    requests, so the tracker keys its histories by the source's name."""
    tracker = AcceptanceTracker(PopulationPrior(), preseed=[0.5])
    source = UnhashableSource("toy")
    tracker.observe_round(source, num_offered_drafts=1, num_accepted_drafts=1, is_terminated=False)
    assert tracker.history(source) is tracker.history(DraftSource("toy"))
    assert tracker.history(HEAD_DRAFTS).survivals(1) == (0.5,)


def test_the_family_follows_a_replaced_source():
    """family is derived in __post_init__, so replace() derives it again."""
    copies, spec = DraftSource("copy"), RequestSpec(16, 40)
    assert spec.family == "mtp"
    assert replace(spec, proposal_source=copies).family == "copy"
    both = replace(spec, proposal_choices=(HEAD_DRAFTS, copies))
    assert both.family == "mtp+copy"
    assert spec == RequestSpec(16, 40) and hash(spec) == hash(RequestSpec(16, 40))
