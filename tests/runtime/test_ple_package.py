"""The PLE table's residency and delivery live in one package, ``ignition.runtime.ple``."""

from __future__ import annotations

import pkgutil

import ignition.runtime
import ignition.runtime.ple as ple


def test_the_package_holds_one_module_per_job():
    modules = {m.name for m in pkgutil.iter_modules(ple.__path__)}
    assert modules == {
        "table",
        "store",
        "cache",
        "mailbox",
        "delivery",
        "model",
        "stats",
        "validation",
        "graph_mailbox",
        "in_graph",
    }


def test_no_flat_ple_module_is_left_in_the_runtime():
    flat = [m.name for m in pkgutil.iter_modules(ignition.runtime.__path__)
            if m.name.startswith("ple_")]  # fmt: skip
    assert flat == []
