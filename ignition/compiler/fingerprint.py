"""Identify a checkpoint: a full content hash once at build, a cheap stat check at serve
(size and modification time per file; ``--verify-weights`` hashes again)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHECKPOINT_SUFFIXES = (".json", ".safetensors")


@dataclass(frozen=True)
class FileStamp:
    """What a stat tells about one checkpoint file."""

    name: str
    size: int
    mtime_ns: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "size": self.size, "mtime_ns": self.mtime_ns}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FileStamp:
        return cls(str(data["name"]), int(data["size"]), int(data["mtime_ns"]))


def checkpoint_files(path: Path) -> list[Path]:
    """Config, weights and tokenizer files, in name order (what the hash covers)."""
    return sorted(p for p in path.iterdir() if p.suffix in CHECKPOINT_SUFFIXES and p.is_file())


def checkpoint_sha256(path: Path) -> str:
    """Hash of config, weights and tokenizer files, in name order."""
    digest = hashlib.sha256()
    for file in checkpoint_files(path):
        digest.update(file.name.encode())
        with file.open("rb") as f:
            for block in iter(lambda f=f: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def checkpoint_stamps(path: Path) -> list[FileStamp]:
    """Size and modification time of every hashed file: no file content is read."""
    stamps = []
    for file in checkpoint_files(path):
        stat = file.stat()
        stamps.append(FileStamp(file.name, stat.st_size, stat.st_mtime_ns))
    return stamps


def stamp_mismatch(path: Path, built: list[FileStamp]) -> str | None:
    """A one-line description of the first difference from the build's stamps, or None."""
    now = {s.name: s for s in checkpoint_stamps(path)}
    then = {s.name: s for s in built}
    for name in sorted(then.keys() | now.keys()):
        if name not in now:
            return f"{path / name}: missing (present at build)"
        if name not in then:
            return f"{path / name}: not present at build"
        a, b = then[name], now[name]
        if a.size != b.size:
            return f"{path / name}: size {b.size} bytes, {a.size} at build"
        if a.mtime_ns != b.mtime_ns:
            return f"{path / name}: modified since the build (mtime changed)"
    return None
