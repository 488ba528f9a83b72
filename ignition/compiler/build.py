"""The build pipeline: recipe -> catalog -> prepared, validated programs -> a bundle.

``ignition build`` writes ``artifacts/<recipe>/``:

- ``catalog.json``: the descriptors (the build/runtime contract);
- ``manifest.json``: recipe, options, checkpoint hash, package versions, device,
  and per program its validation time and (on GPU) capture memory;
- ``tokenizer.json`` / ``tokenizer_config.json``, and ``chat_template.jinja``,
  ``additional_chat_templates/`` and ``generation_config.json`` where present:
  copied from the checkpoint;
- the weights: a reference to the checkpoint folder, or a copy (``--copy-weights``);
- ``build_report.md``: rendered from ``templates/build_report.md.j2``.

CUDA graphs cannot be serialized, so the runtime prepares its programs again
at load; what a build proves is that every descriptor can be built, captured
and run on real inputs for this checkpoint. A rebuild whose inputs (recipe
file, options, checkpoint, package versions, device kind) are unchanged reuses
the recorded results of programs it already validated.
"""

from __future__ import annotations

import hashlib
import json
import platform
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol

import torch
from jinja2 import Environment, PackageLoader, StrictUndefined

from ignition.compiler.device import configure_threads, resolve_device
from ignition.compiler.fingerprint import checkpoint_sha256, checkpoint_stamps
from ignition.compiler.graph import GraphCapturer, capture_order, prepare_programs
from ignition.compiler.programs import check_buildable
from ignition.compiler.state_ops import StateOperations
from ignition.compiler.validate import validate_program, validate_state_operations
from ignition.compiler.workspace import lane_table_bytes
from ignition.components.capacity import plan_catalog
from ignition.components.catalog import Catalog, Descriptor, GraphKind, save_catalog
from ignition.model.families import family_for_checkpoint, get_family
from ignition.model.state import ModelState, index_key_dtype
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
    """Where validation gets the PLE n-gram rows when the table stays off the device
    (``runtime.ple.validation.BuildRows``; the compiler may not import the runtime): the
    model is then loaded without its tables and the programs resolve rows through the same
    store and mailbox serving uses (docs/ple.md)."""

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
    """Copy the tokenizer, chat templates and generation config the runtime reads.

    A rebuild into the same folder drops files the checkpoint no longer has, so a
    removed chat template does not live on in the bundle.
    """
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


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in ("ignition", "torch", "triton"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def _fingerprint(
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


def _previous_programs(out_dir: Path, fingerprint: str) -> dict[str, dict[str, Any]]:
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


def _sample_tokens(checkpoint: Path) -> list[int]:
    from tokenizers import Tokenizer

    tokenizer_path = checkpoint / "tokenizer.json"
    if not tokenizer_path.exists():
        raise BuildError(f"{checkpoint}: no tokenizer.json beside the weights")
    return Tokenizer.from_file(str(tokenizer_path)).encode(VALIDATION_TEXT).ids


def resolve_recipe(recipe_name: str | None, checkpoint: Path) -> Recipe:
    """The recipe to build: the one named, checked against the checkpoint's family, or the
    one registered for the checkpoint's ``model_type`` when none is named."""
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
    """``load`` reads the checkpoint (a tensor-parallel rank reads its shard); ``write``
    False runs every step but writes nothing (the ranks beside rank zero: their programs
    run the same collectives as rank zero's). ``ple``: the PLE n-gram table's entry for the
    manifest and the report (runtime.ple.delivery.describe_table; None: no table).
    ``ple_rows``: where the rows come from when the table stays off the device; then the
    table is never read whole (the loader skips it, validation reads the rows it hashes to)."""
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
    fingerprint = _fingerprint(recipe, options, sha, torch_device, tensor_parallel_size)
    previous = _previous_programs(out_dir, fingerprint)

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
    if todo:
        rows = ple_rows if skips_table else None
        results.update(
            _prepare_and_validate(
                model, recipe, todo, checkpoint, torch_device, on_program, rows, keys
            )
        )

    state_operations = _validate_state_operations(
        model, recipe.capacity.kv_page_size, torch_device, keys
    )
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
    """A storage choice for QSA index keys on a model without them is accepted (a checkpoint
    served through the build cache passes serve's flag whatever its family), and said once."""
    if options.indexer_kv_dtype in (None, "auto") or model.config.qsa_indexer is not None:
        return None
    return (
        f"recipe {recipe.name}: the model has no QSA indexer, so indexer_kv_dtype "
        f"{options.indexer_kv_dtype!r} changes nothing"
    )


def _validation_state(
    model, page_size: int, descriptors, device, index_keys: torch.dtype | None = None
) -> ModelState:
    """Slots for the widest program (at least two, for state operations), each with room for
    the largest packed extent plus one round's lookahead, and the scratch page at the end;
    ``index_keys``: the storage of QSA's index keys (None: the model's dtype)."""
    descriptors = [d for d in descriptors if d.kind is not GraphKind.VISION]
    num_slots = max(2, max((d.row_capacity for d in descriptors), default=1))
    max_tokens = max(
        (d.max_packed_extent + d.token_capacity + d.proposal_depth + 1 for d in descriptors),
        default=page_size,
    )
    per_slot = -(-max_tokens // page_size)
    return ModelState.allocate(
        model.config,
        num_slots,
        per_slot * num_slots + 1,
        page_size,
        per_slot,
        device=device,
        dtype=next(model.parameters()).dtype,
        index_key_dtype=index_keys,
    )


def _prepare_and_validate(
    model, recipe: Recipe, todo, checkpoint: Path, device, on_program, ple_rows=None,
    index_keys: torch.dtype | None = None,
):  # fmt: skip
    state = _validation_state(model, recipe.capacity.kv_page_size, todo, device, index_keys)
    sample = _sample_tokens(checkpoint)
    results: dict[str, dict[str, Any]] = {}
    bind = None if ple_rows is None else ple_rows.before_capture(model, device)
    programs, pending = prepare_programs(model, state, todo, device, before_capture=bind)
    if ple_rows is not None:
        ple_rows.attach(model, device, [program for program, _ in programs.values()])
    try:
        _validate_all(programs, pending, state, sample, model, todo, on_program, results)
    finally:
        if ple_rows is not None:
            ple_rows.close()
    return results


def _validate_all(programs, pending, state, sample, model, todo, on_program, results) -> None:
    for d in todo:
        program, prepared = programs[d.name]
        result = validate_program(
            program, prepared, state, pending, sample, model.config.vocab_size
        )
        results[d.name] = {
            "name": d.name,
            **d.to_json(),
            "validation_ns": result.validation_ns,
            "capture_bytes": prepared.capture_bytes,
        }
        if on_program is not None:
            on_program(d, False)


def _validate_state_operations(
    model, page_size: int, device, index_keys: torch.dtype | None = None
) -> list[dict[str, Any]]:
    """Snapshot, restore and init, prepared over a small state and checked: the first two
    round-trip a slot, the third writes what ``reset_slot`` writes."""
    state = _validation_state(model, page_size, (), device, index_keys)
    ops = StateOperations(state, num_rows=1, capturer=GraphCapturer(device))
    prepared = {p.name: p for p in ops.programs.values()}
    return [
        {
            "name": result.name,
            "validation_ns": result.validation_ns,
            "capture_bytes": prepared[result.name].capture_bytes,
        }
        for result in validate_state_operations(ops)
    ]


def _lane_summary(catalog: Catalog, results: dict[str, dict[str, Any]]) -> dict[str, int]:
    """What multi-lane prompt programs add: how many there are, their captured bytes (0
    when eager) and the workspace's per-lane tables beyond one lane."""
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
