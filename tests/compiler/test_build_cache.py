"""The build cache of ``ignition serve CHECKPOINT``: one build per key, reused while intact,
rebuilt (never served) when partial or corrupt. The builds here are fakes that write the
files a bundle has; tests/server/test_serve_path.py builds a real one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ignition.compiler.build_cache import (
    MARKER,
    cache_key,
    default_cache_root,
    ensure_bundle,
    problem,
)


class FakeBuild:
    def __init__(self) -> None:
        self.folders: list[Path] = []

    def __call__(self, folder: Path) -> None:
        self.folders.append(folder)
        folder.mkdir(parents=True)
        (folder / "manifest.json").write_text(json.dumps({"build": len(self.folders)}))
        (folder / "catalog.json").write_text("{}")
        (folder / "tokenizer.json").write_text("{}")


@pytest.fixture
def checkpoint(tmp_path) -> Path:
    path = tmp_path / "checkpoint"
    path.mkdir()
    (path / "config.json").write_text("{}")
    (path / "model.safetensors").write_bytes(b"weights")
    return path


def test_the_first_start_builds_and_the_second_reuses(tmp_path):
    build = FakeBuild()
    first = ensure_bundle(tmp_path, "k1", build)
    second = ensure_bundle(tmp_path, "k1", build)
    assert first.built and not second.built
    assert len(build.folders) == 1
    assert first.path == second.path == tmp_path / "bundles" / "k1"
    assert problem(first.path, "k1") is None


def test_the_build_writes_into_a_private_folder_then_renames_it(tmp_path):
    build = FakeBuild()
    cached = ensure_bundle(tmp_path, "k", build)
    assert build.folders[0].name.startswith("k.partial-")
    assert not build.folders[0].exists()  # renamed into place
    assert [p.name for p in (tmp_path / "bundles").iterdir()] == ["k"]
    assert cached.path.name == "k"


def test_an_entry_without_its_marker_is_rebuilt_not_served(tmp_path):
    build = FakeBuild()
    entry = ensure_bundle(tmp_path, "k", build).path
    (entry / MARKER).unlink()  # as an interrupted writer leaves it
    again = ensure_bundle(tmp_path, "k", build)
    assert again.built and "did not finish" in again.replaced
    assert len(build.folders) == 2
    assert problem(again.path, "k") is None


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda e: (e / "catalog.json").write_text('{"truncated'), "catalog.json changed"),
        (lambda e: (e / "manifest.json").unlink(), "manifest.json is missing"),
        (lambda e: (e / MARKER).write_text("{not json"), "unreadable"),
    ],
)
def test_a_corrupt_entry_is_rebuilt_and_says_why(tmp_path, damage, reason):
    build = FakeBuild()
    entry = ensure_bundle(tmp_path, "k", build).path
    damage(entry)
    again = ensure_bundle(tmp_path, "k", build)
    assert again.built and reason in again.replaced
    assert json.loads((again.path / "manifest.json").read_text()) == {"build": 2}


def test_a_failed_build_leaves_no_entry_and_no_partial_folder(tmp_path):
    def failing(folder: Path) -> None:
        folder.mkdir()
        (folder / "manifest.json").write_text("{}")
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError):
        ensure_bundle(tmp_path, "k", failing)
    assert list((tmp_path / "bundles").iterdir()) == []


def test_the_key_follows_the_checkpoint_files_and_every_build_input(checkpoint):
    inputs = {"options": {"concurrency": 2}, "device": "cpu"}
    key = cache_key(checkpoint, inputs)
    assert cache_key(checkpoint, dict(inputs)) == key
    assert cache_key(checkpoint, {**inputs, "options": {"concurrency": 1}}) != key
    assert cache_key(checkpoint, {**inputs, "device": "cuda"}) != key
    (checkpoint / "model.safetensors").write_bytes(b"other weights")
    assert cache_key(checkpoint, inputs) != key


def test_the_cache_root_is_the_environment_variable_else_the_home_cache():
    assert default_cache_root({"IGNITION_CACHE": "/data/cache"}) == Path("/data/cache")
    assert default_cache_root({}) == Path("~/.cache/ignition").expanduser()
