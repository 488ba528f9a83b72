"""The ``ignition`` command line: one module per command (``recipes``, ``catalog``,
``build``, ``generate``, ``serve``, ``debug-serve``, ``simulate``), option groups as
frozen dataclasses built and checked once from the parsed flags, registered in
``app.py``.

Commands import their rooms lazily so that ``ignition recipes`` or
``ignition catalog`` start without importing torch.
"""

from __future__ import annotations

from ignition.cli.app import main

__all__ = ["main"]
