"""Switches for before/after studies of two Helios rules (scripts/scheduling_sim)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ignition.helios.decide import left_out, utility


@contextlib.contextmanager
def newcomer_rule(name: str) -> Iterator[None]:
    """Runs Helios under one of ``utility.NEWCOMER_RULES``."""
    previous = utility.NEWCOMER_RULE
    utility.NEWCOMER_RULE = name
    try:
        yield
    finally:
        utility.NEWCOMER_RULE = previous


@contextlib.contextmanager
def left_out_rule(enabled: bool) -> Iterator[None]:
    """Runs Helios with or without ``left_out.py``'s rule."""
    previous = left_out.ENABLED
    left_out.ENABLED = enabled
    try:
        yield
    finally:
        left_out.ENABLED = previous
