"""The n-gram (PLE) table as serve opens it: serve's options over the build's, then the
table at its residency, each failure a BundleError naming the manifest (docs/ple.md)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from ignition.runtime.bundle import Bundle, BundleError
from ignition.runtime.ple.delivery import PleOptions
from ignition.runtime.ple.model import open_in_graph, open_model_ple
from ignition.runtime.ple.table import PleTableError


def serve_ple_options(ple: PleOptions, built: dict, where: str = "manifest.json") -> PleOptions:
    """Serve's PLE options over the bundle's (``manifest.json``'s ``ple`` entry)."""
    try:
        return ple.over(built, where)
    except ValueError as err:
        raise BundleError(str(err)) from None


def built_ple(artifacts: str | Path) -> dict:
    """The bundle's ``ple`` entry ({} when it has none)."""
    try:
        entry = json.loads((Path(artifacts) / "manifest.json").read_text()).get("ple", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return entry if isinstance(entry, dict) else {}


def _checkpoint_and_options(bundle: Bundle, ple: PleOptions) -> tuple[Path, PleOptions]:
    checkpoint = Path(bundle.manifest["checkpoint"]["path"])
    if not checkpoint.is_absolute():
        checkpoint = bundle.path / checkpoint
    where = str(bundle.path / "manifest.json")
    return checkpoint, serve_ple_options(ple, bundle.manifest.get("ple", {}), where)


def open_graph_rows(bundle: Bundle, ple: PleOptions, device: torch.device):
    """CUDA with the table off the device: the programs' in-graph row source (None else)."""
    checkpoint, options = _checkpoint_and_options(bundle, ple)
    try:
        return open_in_graph(checkpoint, options, device, bundle.model)
    except (PleTableError, ValueError) as err:
        raise BundleError(str(err)) from None


def open_table(
    bundle: Bundle, ple: PleOptions, device: torch.device, worker: object = None, in_graph=None
):
    """The table at its residency; off the device, its rows reach the programs through
    ``worker`` (or ``in_graph``, bound at capture)."""
    checkpoint, options = _checkpoint_and_options(bundle, ple)
    try:
        return open_model_ple(checkpoint, options, device, worker, bundle.model, True, in_graph)
    except (PleTableError, ValueError) as err:
        raise BundleError(str(err)) from None
