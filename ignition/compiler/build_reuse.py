"""Whether a rebuild may reuse earlier results: its inputs, hashed, and what they yielded."""

from __future__ import annotations

import hashlib
import json
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from ignition.recipes import LoadOptions, Recipe


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in ("ignition", "torch", "triton"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def inputs_fingerprint(
    recipe: Recipe, options: LoadOptions, sha: str, device: torch.device, tp_size: int = 1
) -> str:
    parts = [
        recipe.path.read_text(),
        json.dumps(options.to_json(), sort_keys=True),
        sha,
        json.dumps(package_versions(), sort_keys=True),
        device.type,
    ]
    if tp_size > 1:  # one rank's fingerprint is unchanged, so its bundles are still reused
        parts.append(f"tensor_parallel_size={tp_size}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def previous_programs(out_dir: Path, fingerprint: str) -> dict[str, dict[str, Any]]:
    path = out_dir / "manifest.json"
    if not path.exists():
        return {}
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError:
        return {}
    if manifest.get("inputs_fingerprint") != fingerprint:
        return {}
    return {p["name"]: p for p in manifest.get("programs", []) if "name" in p}
