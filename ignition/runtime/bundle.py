"""Load a built bundle (``artifacts/<recipe>/``) into a ready engine."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer

from ignition.compiler.build import MANIFEST_FORMAT, MANIFEST_VERSION
from ignition.compiler.device import resolve_device
from ignition.compiler.fingerprint import FileStamp, checkpoint_sha256, stamp_mismatch
from ignition.compiler.programs import ProgramError, check_buildable
from ignition.components.catalog import Catalog, load_catalog
from ignition.model.model import HybridModel
from ignition.model.weights import load_model
from ignition.runtime.chat.template_files import (
    ChatTemplateFileError,
    ChatTemplates,
    load_chat_templates,
)
from ignition.runtime.requests.generation_config import (
    GenerationConfigError,
    GenerationDefaults,
    load_generation_defaults,
)


class BundleError(RuntimeError):
    """A bundle that cannot be served as it is."""


@dataclass
class Bundle:
    path: Path
    manifest: dict[str, Any]
    catalog: Catalog
    tokenizer: Tokenizer
    chat_templates: ChatTemplates
    generation_defaults: GenerationDefaults
    eos_token_ids: tuple[int, ...]
    model: HybridModel

    @property
    def name(self) -> str:
        return str(self.manifest["recipe"])

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text).ids

    def encode_rendered(self, texts: Sequence[str]) -> list[list[int]]:
        """Tokenize rendered chats; the template already wrote any special tokens."""
        return [e.ids for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def split_tokens(self) -> list[str]:
        """Added tokens the tokenizer splits out first, untouched by normalization."""
        return [
            t.content
            for t in self.tokenizer.get_added_tokens_decoder().values()
            if not (t.lstrip or t.rstrip or t.single_word or t.normalized)
        ]

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise BundleError(f"{path}: missing; run `ignition build` first") from None
    except json.JSONDecodeError as err:
        raise BundleError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise BundleError(f"{path}: expected a JSON object")
    return data


def _eos_ids(
    tokenizer: Tokenizer,
    config: dict[str, Any],
    model: HybridModel,
    generation_eos: tuple[int, ...] = (),
) -> tuple[int, ...]:
    configured = model.config.eos_token_id  # an id or, as Hugging Face allows, a list of ids
    if configured is None:
        ids: set[int] = set()
    elif isinstance(configured, int):
        ids = {configured}
    else:
        ids = {int(i) for i in configured}
    ids.update(generation_eos)  # generation_config.json often adds the end-of-turn token
    eos = config.get("eos_token")
    if isinstance(eos, str) and tokenizer.token_to_id(eos) is not None:
        ids.add(tokenizer.token_to_id(eos))
    return tuple(sorted(i for i in ids if i is not None))


def verify_checkpoint(checkpoint: Path, record: dict[str, Any], verify_weights: bool) -> None:
    """Raise BundleError when ``checkpoint`` is not the one the build validated."""
    stamps = record.get("files")
    if stamps is not None and not verify_weights:
        mismatch = stamp_mismatch(checkpoint, [FileStamp.from_json(s) for s in stamps])
        if mismatch is not None:
            raise BundleError(
                f"{mismatch}; rebuild the bundle, or pass --verify-weights to accept it if its "
                "content hash still matches"
            )
        return
    sha = checkpoint_sha256(checkpoint)
    built_sha = record["sha256"]
    if sha != built_sha:
        raise BundleError(
            f"{checkpoint}: sha256 {sha[:12]} differs from the built {built_sha[:12]}; "
            "rebuild the bundle"
        )


def load_bundle(
    path: str | Path,
    device: str | None = None,
    *,
    verify_weights: bool = False,
    model_loader: Callable[[Path, torch.device], HybridModel] = load_model,
) -> Bundle:
    """``model_loader`` reads the checkpoint (a tensor-parallel rank loads its shard)."""
    path = Path(path)
    manifest = _read_json(path / "manifest.json")
    if manifest.get("format") != MANIFEST_FORMAT or manifest.get("version") != MANIFEST_VERSION:
        raise BundleError(
            f"{path / 'manifest.json'}: format {manifest.get('format')!r} version "
            f"{manifest.get('version')!r}; this runtime reads {MANIFEST_FORMAT} v{MANIFEST_VERSION}"
        )
    catalog = load_catalog(path / "catalog.json")
    checkpoint = Path(manifest["checkpoint"]["path"])
    if not checkpoint.is_absolute():
        checkpoint = path / checkpoint
    if not (checkpoint / "config.json").exists():
        raise BundleError(f"{path / 'manifest.json'}: checkpoint {checkpoint} is gone")
    verify_checkpoint(checkpoint, manifest["checkpoint"], verify_weights)
    torch_device = resolve_device(device)
    model = model_loader(checkpoint, torch_device)
    for i, d in enumerate(catalog.descriptors):
        try:
            check_buildable(d, model)
        except ProgramError as err:
            raise BundleError(f"{path / 'catalog.json'}: descriptors[{i}]: {err}") from None
    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    config_path = path / "tokenizer_config.json"
    tokenizer_config = _read_json(config_path) if config_path.exists() else {}
    try:
        chat_templates = load_chat_templates(path, tokenizer_config)
        generation_defaults = load_generation_defaults(path)
    except (ChatTemplateFileError, GenerationConfigError) as err:
        raise BundleError(str(err)) from None
    return Bundle(
        path=path,
        manifest=manifest,
        catalog=catalog,
        tokenizer=tokenizer,
        chat_templates=chat_templates,
        generation_defaults=generation_defaults,
        eos_token_ids=_eos_ids(
            tokenizer, tokenizer_config, model, generation_defaults.eos_token_ids
        ),
        model=model,
    )
