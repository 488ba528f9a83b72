"""Ignition: serve hybrid LLMs from prepared graphs. The root stays lazy: ``import
ignition.helios`` must not pull in torch, and the CLI must start without the model."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
