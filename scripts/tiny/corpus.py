"""The offline training corpus of the embedded default checkpoint.

We train on the pure-Python modules at the top of CPython's standard library
(``Lib/*.py``, no test packages): every machine that runs Ignition already has
them, they need no download and no licence beyond the PSF's, and generated text
is easy to recognise (it looks like Python). The corpus is the sorted list of
those files read as UTF-8; its SHA-256 goes into the model card so a retrain on
a different CPython patch release is visible as a different corpus.

Held-out text is every twentieth file (by sorted name), so validation loss and
MTP acceptance are measured on modules the model never saw.
"""

from __future__ import annotations

import hashlib
import sysconfig
from dataclasses import dataclass
from pathlib import Path

HELD_OUT_EVERY = 20


@dataclass(frozen=True)
class Corpus:
    root: Path
    train_files: tuple[Path, ...]
    held_out_files: tuple[Path, ...]

    def text(self, files: tuple[Path, ...]) -> str:
        return "\n\n".join(p.read_text(encoding="utf-8", errors="replace") for p in files)

    @property
    def train_text(self) -> str:
        return self.text(self.train_files)

    @property
    def held_out_text(self) -> str:
        return self.text(self.held_out_files)

    def sha256(self) -> str:
        digest = hashlib.sha256()
        for path in (*self.train_files, *self.held_out_files):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
        return digest.hexdigest()


def stdlib_corpus(root: Path | None = None) -> Corpus:
    """The top-level stdlib modules of the running interpreter, split by file."""
    root = Path(root or sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.glob("*.py") if not p.name.startswith("test"))
    if not files:
        raise FileNotFoundError(f"{root}: no standard-library modules found to train on")
    held_out = tuple(p for i, p in enumerate(files) if i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1)
    train = tuple(p for p in files if p not in held_out)
    return Corpus(root=root, train_files=train, held_out_files=held_out)
