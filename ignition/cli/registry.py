"""A command declares its name, its options and its run function; :func:`to_click` makes
the click command the ``ignition`` group registers (``ignition/cli/app.py``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import click

from ignition.cli.errors import fail_cleanly

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def apply(options: Sequence[Decorator], fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate ``fn`` with ``options`` listed top to bottom, as the help shows them."""
    for option in reversed(options):
        fn = option(fn)
    return fn


@dataclass(frozen=True)
class Command:
    """One ``ignition`` command. ``run`` takes every parsed flag as a keyword argument and
    builds its option groups from them; its docstring is the command's help.
    ``clean_errors`` turns the rooms' bad-input errors into one-line exits (status 2)."""

    name: str
    options: tuple[Decorator, ...]
    run: Callable[..., None]
    clean_errors: bool = True

    def to_click(self) -> click.Command:
        run = fail_cleanly(self.run) if self.clean_errors else self.run
        return click.command(self.name)(apply(self.options, run))
