"""The ``ignition`` command line: one module per command, registered in ``app.py``, each
building frozen option groups checked once from its flags. Commands import their rooms
lazily so that ``ignition recipes`` or ``ignition catalog`` start without torch."""

from __future__ import annotations

from ignition.cli.app import main

__all__ = ["main"]
