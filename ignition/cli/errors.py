"""How the CLI fails on bad input: one line on stderr, no traceback, exit status 2 (as
argparse and click do for a malformed flag)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

from ignition.recipes import RecipeError


class UserError(click.ClickException):
    """A bad recipe, option or catalog: one line, no traceback, exit status 2."""

    exit_code = 2


def user_errors() -> tuple[type[Exception], ...]:
    """Errors that mean "bad input", imported only once a command fails (so that a command
    that never fails never imports torch for them)."""
    from ignition.components.capacity import CapacityError
    from ignition.components.program_kinds import CatalogError

    errors: list[type[Exception]] = [RecipeError, CapacityError, CatalogError]
    try:
        from ignition.compiler.build import BuildError
        from ignition.model.config import ConfigError
        from ignition.model.weights import WeightsError
        from ignition.runtime.bundle import BundleError

        errors += [BuildError, BundleError, ConfigError, WeightsError]
    except ImportError:  # torch missing: only the planning commands work
        pass
    return tuple(errors)


def fail_cleanly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with the rooms' bad-input errors turned into :class:`UserError`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except user_errors() as err:
            raise UserError(str(err)) from None

    return wrapper
