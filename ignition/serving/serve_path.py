"""``ignition serve PATH``: PATH is a bundle (``manifest.json``) or a checkpoint folder, which
is built once into the build cache (compiler/build_cache.py) and served from there."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ignition.compiler.context_fit import ContextFit
from ignition.recipes import LoadOptions

PathKind = Literal["bundle", "checkpoint"]


class ServePathError(ValueError):
    """PATH is neither a bundle nor a checkpoint folder (one line naming what is missing)."""


def classify(path: Path) -> PathKind:
    """ "bundle" or "checkpoint"; anything else raises ServePathError naming what is missing."""
    if not path.exists():
        raise ServePathError(f"{path}: no such folder")
    if not path.is_dir():
        raise ServePathError(
            f"{path}: a file, not a folder; serve a checkpoint folder (config.json and "
            "*.safetensors) or a bundle written by `ignition build` (manifest.json)"
        )
    if (path / "manifest.json").is_file():
        return "bundle"
    if (path / "config.json").is_file():
        if not any(path.glob("*.safetensors")):
            raise ServePathError(
                f"{path}: config.json but no *.safetensors weights, so not a checkpoint folder"
            )
        return "checkpoint"
    raise ServePathError(
        f"{path}: neither a bundle (no manifest.json) nor a checkpoint folder (no config.json)"
    )


def choose_path(path: Path | None, artifacts: str | None) -> Path:
    """The one PATH given, positionally or as ``--artifacts``."""
    if path is not None and artifacts is not None:
        raise ServePathError(
            f"serve {path} and --artifacts {artifacts}: give the bundle or checkpoint once"
        )
    chosen = path if path is not None else (Path(artifacts) if artifacts else None)
    if chosen is None:
        raise ServePathError(
            "serve needs PATH: a checkpoint folder or a bundle (`ignition serve PATH`)"
        )
    return chosen


@dataclass(frozen=True)
class CheckpointBuild:
    """What a checkpoint is built with when it is served directly."""

    checkpoint: Path
    options: LoadOptions
    device: str | None = None
    threads: int | None = None
    ple: dict[str, Any] | None = None  # the build report's PLE entry
    # Ranks the bundle is built for: a separate cache entry per size.
    tensor_parallel_size: int = 1


def build_options(
    checkpoint: Path,
    *,
    max_num_seqs: int | None,
    speculation: str | None,
    mixed: bool,
    indexer_kv_dtype: str | None = None,
) -> ContextFit:
    """The build's options: the recipe's defaults with serve's flags (mixed programs, slots,
    speculation, indexer dtype), prompt buckets capped to ``max_position_embeddings``."""
    from ignition.compiler.build import resolve_recipe
    from ignition.compiler.context_fit import fit_checkpoint_build

    recipe = resolve_recipe(None, checkpoint)
    options = LoadOptions(
        mixed_prefill=mixed and recipe.supports.mixed_capture,
        concurrency=max_num_seqs,
        speculation=speculation,
        indexer_kv_dtype=indexer_kv_dtype,
    )
    return fit_checkpoint_build(recipe, options, checkpoint)


def cache_inputs(build: CheckpointBuild) -> dict[str, Any]:
    """Every build input besides the checkpoint's files, for the cache key."""
    from ignition.compiler.build import resolve_recipe
    from ignition.compiler.build_reuse import package_versions
    from ignition.compiler.device import resolve_device

    recipe = resolve_recipe(None, build.checkpoint)
    return {
        "recipe": recipe.name,
        "recipe_text": recipe.path.read_text(),
        "options": build.options.to_json(),
        "packages": package_versions(),
        "device": resolve_device(build.device).type,
        "ple": build.ple,
        "tensor_parallel_size": build.tensor_parallel_size,
    }


def built_bundle(
    build: CheckpointBuild,
    cache_root: Path,
    run_build: Callable[[CheckpointBuild, Path], None],
    say: Callable[[str], None] = lambda _line: None,
) -> Path:
    """The cached bundle for ``build``, built by ``run_build`` when none is intact; ``say``
    gets one line about what happened."""
    from ignition.compiler.build_cache import cache_key, ensure_bundle

    key = cache_key(build.checkpoint, cache_inputs(build))

    def write(folder: Path) -> None:
        say(f"building {build.checkpoint} into the cache: {folder.parent / key}")
        run_build(build, folder)

    cached = ensure_bundle(cache_root, key, write)
    if cached.replaced is not None:
        say(f"the cached entry was unusable ({cached.replaced}); rebuilt {cached.path}")
    elif not cached.built:
        say(f"reusing the cached build {cached.path}")
    return cached.path
