"""Bundles built for ``ignition serve CHECKPOINT``: built once, reused, never served broken.

The key hashes every build input; a build writes a private folder, records each file's
SHA-256, then takes the key's name. Each start rehashes (not the weights), so a partial or
edited entry is rebuilt. The README's ``ignition serve`` section states the contract.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CACHE_ENV = "IGNITION_CACHE"
MARKER = "ignition-cache.json"
MARKER_FORMAT = "ignition-build-cache"
REQUIRED_FILES = ("manifest.json", "catalog.json")


class CacheError(RuntimeError):
    """The cache cannot hold a build (an unwritable folder, a failed rename)."""


def default_cache_root(environ: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    configured = environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path("~/.cache/ignition").expanduser()


def cache_key(checkpoint: Path, inputs: Mapping[str, Any]) -> str:
    """The entry's name: the checkpoint's stamps plus ``inputs``, as sorted-key JSON."""
    from ignition.compiler.fingerprint import checkpoint_stamps

    checkpoint = checkpoint.resolve()
    record = {
        "checkpoint": str(checkpoint),
        "files": [s.to_json() for s in checkpoint_stamps(checkpoint)],
        "inputs": inputs,
    }
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:32]


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _entry_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MARKER)


def seal(folder: Path, key: str) -> None:
    """Record every file's hash: from here on the folder is a complete entry for ``key``."""
    files = {str(p.relative_to(folder)): _file_digest(p) for p in _entry_files(folder)}
    marker = {"format": MARKER_FORMAT, "key": key, "files": files}
    (folder / MARKER).write_text(json.dumps(marker, indent=2) + "\n")


def problem(folder: Path, key: str) -> str | None:
    """Why ``folder`` is not a complete, intact entry for ``key``; None when it is."""
    try:
        marker = json.loads((folder / MARKER).read_text())
    except FileNotFoundError:
        return f"no {MARKER} (the build did not finish)"
    except (OSError, json.JSONDecodeError) as err:
        return f"{MARKER} unreadable ({err})"
    if not isinstance(marker, dict) or marker.get("format") != MARKER_FORMAT:
        return f"{MARKER} is not a cache record"
    if marker.get("key") != key:
        return f"{MARKER} belongs to key {marker.get('key')!r}"
    files = marker.get("files")
    if not isinstance(files, dict) or any(name not in files for name in REQUIRED_FILES):
        return f"{MARKER} does not list {' and '.join(REQUIRED_FILES)}"
    for name, expected in sorted(files.items()):
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if _file_digest(path) != expected:
            return f"{name} changed since the build"
    return None


@dataclass(frozen=True)
class CachedBundle:
    path: Path
    built: bool  # False: an intact entry was reused
    replaced: str | None = None  # why an existing entry was discarded, if one was


def ensure_bundle(root: Path, key: str, build: Callable[[Path], None]) -> CachedBundle:
    """The entry for ``key`` under ``root``, written by ``build(folder)`` when none is intact."""
    bundles = root / "bundles"
    final = bundles / key
    replaced = None
    if final.exists():
        replaced = problem(final, key)
        if replaced is None:
            return CachedBundle(final, built=False)
    try:
        bundles.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise CacheError(f"{bundles}: cannot create the build cache ({err})") from None
    partial = bundles / f"{key}.partial-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        build(partial)
        seal(partial, key)
        if final.exists():  # a broken entry (or one a concurrent start just finished)
            if problem(final, key) is None:
                return CachedBundle(final, built=True, replaced=replaced)
            shutil.rmtree(final, ignore_errors=True)
        try:
            partial.rename(final)
        except OSError as err:
            if problem(final, key) is None:  # another start won the race: use its entry
                return CachedBundle(final, built=True, replaced=replaced)
            raise CacheError(f"{final}: cannot place the build ({err})") from None
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return CachedBundle(final, built=True, replaced=replaced)
