"""The ``ignition`` group: every command module, each declaring ``COMMAND`` (a
``registry.Command``), registered by its name in :data:`COMMAND_MODULES`."""

from __future__ import annotations

import importlib

import click

COMMAND_MODULES = (
    "recipes",
    "catalog",
    "build",
    "generate",
    "serve",
    "debug_serve",
    "simulate",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ignition")
def main() -> None:
    """Ignition: prepare and serve hybrid LLMs from captured graphs."""


for _module in COMMAND_MODULES:
    main.add_command(importlib.import_module(f"ignition.cli.{_module}").COMMAND.to_click())
