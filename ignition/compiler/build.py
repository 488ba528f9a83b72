"""The build pipeline: recipe -> catalog -> prepared, validated programs -> a bundle.

``ignition build`` writes ``artifacts/<recipe>/``: catalog.json, manifest.json, the tokenizer
files, a weights reference (or copy) and build_report.md. Graphs are not serialized: a build
proves every descriptor builds, captures and runs; a rebuild with unchanged inputs reuses
earlier results. Bundle contents: docs/compiler.md.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import torch
from jinja2 import Environment, PackageLoader, StrictUndefined

from ignition.compiler.buffers import lane_table_bytes
from ignition.compiler.build_reuse import inputs_fingerprint, package_versions, previous_programs
from ignition.compiler.build_validation import check_state_operations, prepare_and_validate
from ignition.compiler.device import configure_threads, resolve_device
from ignition.compiler.fingerprint import checkpoint_sha256, checkpoint_stamps
from ignition.compiler.graph import capture_order
from ignition.compiler.programs import check_buildable
from ignition.components.capacity import plan_catalog
from ignition.components.catalog import Catalog, save_catalog
from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.model.families import family_for_checkpoint, get_family
from ignition.model.state import index_key_dtype
from ignition.model.weights import LoadedCheckpoint, load_checkpoint
from ignition.recipes import LoadOptions, Recipe, get_recipe

MANIFEST_FORMAT = "ignition-manifest"
MANIFEST_VERSION = 1
DEFAULT_CHECKPOINT = Path(__file__).resolve().parent.parent / "assets" / "qwen38-tiny"
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "generation_config.json",
)
TEMPLATE_DIRS = ("additional_chat_templates",)


class PleRowSource(Protocol):
    """Where validation gets PLE rows when the table stays off the device
    (``runtime.ple.validation.BuildRows``; docs/ple.md)."""

    def skips_table(self, device: torch.device) -> bool: ...

    def before_capture(self, model: Any, device: torch.device) -> Callable[[Any], None] | None: ...

    def attach(self, model: Any, device: torch.device, programs: Any) -> None: ...

    def close(self) -> None: ...


VALIDATION_TEXT = 'def main(argv=None):\n    """Run the command line."""\n    return 0\n'


class BuildError(RuntimeError):
    """A build that cannot proceed: unsupported family, missing files, a failed program."""


@dataclass(frozen=True)
class BuildResult:
    out_dir: Path
    catalog: Catalog
    manifest: dict[str, Any]
    num_reused: int
    notes: list[str] = field(default_factory=list)  # one line each, for the user


def copy_tokenizer_files(checkpoint: Path, out_dir: Path) -> None:
    """Copy the tokenizer, templates and generation config, removing ones no longer there."""
    if out_dir.resolve() == checkpoint.resolve():
        return  # building into the checkpoint folder: everything is already there
    for name in TOKENIZER_FILES:
        if (checkpoint / name).is_file():
            shutil.copyfile(checkpoint / name, out_dir / name)
        else:
            (out_dir / name).unlink(missing_ok=True)
    for name in TEMPLATE_DIRS:
        shutil.rmtree(out_dir / name, ignore_errors=True)
        if (checkpoint / name).is_dir():
            shutil.copytree(checkpoint / name, out_dir / name)


def _sample_tokens(checkpoint: Path) -> list[int]:
    from tokenizers import Tokenizer

    tokenizer_path = checkpoint / "tokenizer.json"
    if not tokenizer_path.exists():
        raise BuildError(f"{checkpoint}: no tokenizer.json beside the weights")
    return Tokenizer.from_file(str(tokenizer_path)).encode(VALIDATION_TEXT).ids


def resolve_recipe(recipe_name: str | None, checkpoint: Path) -> Recipe:
    """The recipe named (checked against the checkpoint's family), or the family's own."""
    recipe = get_recipe(recipe_name) if recipe_name is not None else None
    if recipe is not None and get_family(recipe.family) is None:
        raise BuildError(
            f"recipe {recipe.name}: model family {recipe.family!r} has no implementation in "
            "this build; `ignition catalog` still plans its programs"
        )
    if not (checkpoint / "config.json").exists():
        raise BuildError(f"{checkpoint}: not a checkpoint folder (no config.json)")
    family = family_for_checkpoint(checkpoint)
    if recipe is None:
        return get_recipe(family.recipe)
    if recipe.family != family.name:
        raise BuildError(
            f"recipe {recipe.name} is for family {recipe.family!r}, but {checkpoint}/config.json "
            f"is family {family.name!r} (recipe {family.recipe}); drop --recipe or pass "
            f"--recipe {family.recipe}"
        )
    return recipe


def build_bundle(
    recipe_name: str | None,
    options: LoadOptions,
    *,
    weights: Path | None = None,
    out_dir: Path | None = None,
    copy_weights: bool = False,
    device: str | None = None,
    threads: int | None = None,
    on_program: Callable[[Descriptor, bool], None] | None = None,
    on_start: Callable[[int], None] | None = None,
    load: Callable[[Path, torch.device], LoadedCheckpoint] = load_checkpoint,
    write: bool = True,
    tensor_parallel_size: int = 1,
    ple: dict[str, Any] | None = None,
    ple_rows: PleRowSource | None = None,
) -> BuildResult:
    """``load`` reads the checkpoint (a tensor-parallel rank its shard); ``write`` False runs
    every step but writes nothing (ranks beside rank zero). ``ple``: the table's manifest
    entry (None: no table); ``ple_rows``: the row source when the table stays off the device."""
    checkpoint = Path(weights) if weights else DEFAULT_CHECKPOINT
    recipe = resolve_recipe(recipe_name, checkpoint)
    plan_catalog(recipe, options)  # bad options fail before the weights are read
    out_dir = Path(out_dir) if out_dir else Path("artifacts") / recipe.name
    torch_device = resolve_device(device)
    configure_threads(torch_device, threads)
    skips_table = ple_rows is not None and ple_rows.skips_table(torch_device)
    if skips_table:
        loaded = load(checkpoint, torch_device, without_ple_tables=True)
    else:
        loaded = load(checkpoint, torch_device)
    model, notes = loaded.model, list(loaded.notes)
    options, note = _without_drafts_if_headless(model, recipe, options)
    if note:
        notes.append(note)
    catalog, note = _without_vision_if_towerless(model, recipe, plan_catalog(recipe, options))
    if note:
        notes.append(note)
    note = _index_keys_note(model, recipe, options)
    if note:
        notes.append(note)
    keys = index_key_dtype(options.indexer_kv_dtype or "auto")
    sha = checkpoint_sha256(checkpoint)
    fingerprint = inputs_fingerprint(recipe, options, sha, torch_device, tensor_parallel_size)
    previous = previous_programs(out_dir, fingerprint)

    for d in catalog.descriptors:
        check_buildable(d, model)
    ordered = capture_order(catalog.descriptors)
    todo = [d for d in ordered if d.name not in previous]
    if on_start is not None:
        on_start(len(ordered))
    for d in ordered:
        if d.name in previous and on_program is not None:
            on_program(d, True)
    results = dict(previous)
    page_size = recipe.capacity.kv_page_size
    if todo:
        rows = ple_rows if skips_table else None
        results.update(
            prepare_and_validate(
                model,
                page_size,
                todo,
                _sample_tokens(checkpoint),
                torch_device,
                on_program,
                rows,
                keys,
            )
        )

    state_operations = check_state_operations(model, page_size, torch_device, keys)
    if not write:
        return BuildResult(out_dir, catalog, {}, len(ordered) - len(todo), notes)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_catalog(catalog, out_dir / "catalog.json")
    copy_tokenizer_files(checkpoint, out_dir)
    weights_ref = _place_weights(checkpoint, out_dir, copy_weights)
    served = out_dir / weights_ref if copy_weights else checkpoint
    manifest = {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        "recipe": recipe.name,
        "recipe_path": str(recipe.path),
        "family": loaded.family.name,
        "options": options.to_json(),
        "checkpoint": {
            "path": weights_ref,
            "sha256": sha,
            "copied": copy_weights,
            "files": [s.to_json() for s in checkpoint_stamps(served)],
        },
        "packages": package_versions(),
        "device": str(torch_device),
        "captured": torch_device.type == "cuda",
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "inputs_fingerprint": fingerprint,
        "counts": catalog.counts(),
        "max_packed_extent": catalog.max_packed_extent(),
        "runtime": {
            "num_slots": recipe.capacity.concurrency
            if options.concurrency is None
            else options.concurrency,
            "page_size": recipe.capacity.kv_page_size,
            "speculation": options.speculation or recipe.capacity.speculation,
            "tensor_parallel_size": tensor_parallel_size,
            "indexer_kv_dtype": options.indexer_kv_dtype or "auto",
        },
        "reused": len(ordered) - len(todo),
        "programs": [results[d.name] for d in ordered],
        "state_operations": state_operations,
        "ple": ple or {"table": "no PLE table"},
        "prompt_lanes": _lane_summary(catalog, results),
    }
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    _write_report(manifest, out_dir)
    return BuildResult(out_dir, catalog, manifest, len(ordered) - len(todo), notes)


def _without_drafts_if_headless(
    model, recipe: Recipe, options: LoadOptions
) -> tuple[LoadOptions, str | None]:
    """A checkpoint without an MTP head builds with speculation off (and says so once)."""
    speculation = options.speculation or recipe.capacity.speculation
    if model.mtp is not None or speculation == "off":
        return options, None
    return replace(options, speculation="off"), (
        f"recipe {recipe.name}: the checkpoint has no MTP head, so speculation is off "
        f"(the recipe's {speculation!r} needs mtp.* tensors)"
    )


def _without_vision_if_towerless(model, recipe: Recipe, catalog: Catalog):
    """A checkpoint without a vision tower builds no vision programs (and says so once)."""
    vision = catalog.of_kind(GraphKind.VISION)
    if model.visual is not None or not vision:
        return catalog, None
    kept = tuple(d for d in catalog.descriptors if d.kind is not GraphKind.VISION)
    return Catalog(catalog.recipe, catalog.options, kept), (
        f"recipe {recipe.name}: the checkpoint has no vision tower, so its "
        f"{len(vision)} vision programs are not built (text prompts only)"
    )


def _index_keys_note(model, recipe: Recipe, options: LoadOptions) -> str | None:
    """A note when an index-key storage is asked of a model without a QSA indexer."""
    if options.indexer_kv_dtype in (None, "auto") or model.config.qsa_indexer is not None:
        return None
    return (
        f"recipe {recipe.name}: the model has no QSA indexer, so indexer_kv_dtype "
        f"{options.indexer_kv_dtype!r} changes nothing"
    )


def _lane_summary(catalog: Catalog, results: dict[str, dict[str, Any]]) -> dict[str, int]:
    """Multi-lane prompt programs: count, captured bytes and per-lane workspace bytes."""
    lanes = [d for d in catalog.descriptors if d.prompt_lanes > 1]
    return {
        "programs": len(lanes),
        "max_lanes": max((d.prompt_lanes for d in catalog.descriptors), default=1),
        "capture_bytes": sum(results[d.name].get("capture_bytes", 0) for d in lanes),
        "workspace_bytes": lane_table_bytes(
            max((d.prompt_lanes for d in catalog.descriptors), default=1)
        ),
    }


def _place_weights(checkpoint: Path, out_dir: Path, copy: bool) -> str:
    if not copy:
        return str(checkpoint.resolve())
    target = out_dir / "weights"
    target.mkdir(exist_ok=True)
    for file in checkpoint.iterdir():
        if file.suffix in (".json", ".safetensors"):
            shutil.copyfile(file, target / file.name)
    return "weights"


def _write_report(manifest: dict[str, Any], out_dir: Path) -> None:
    env = Environment(
        loader=PackageLoader("ignition", "templates"),
        undefined=StrictUndefined,
        trim_blocks=False,
        keep_trailing_newline=True,
    )
    report = env.get_template("build_report.md.j2").render(manifest=manifest)
    (out_dir / "build_report.md").write_text(report)
