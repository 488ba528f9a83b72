"""Model families by name and by config.json ``model_type``, builtins loaded on first use."""

from __future__ import annotations

import importlib
from pathlib import Path

from ignition.model.config import ConfigError, read_config_json
from ignition.model.families.base import ModelFamily

BUILTIN_MODULES = ("qwen3_5", "qwen3_next", "qwen4_exp", "llama")

_FAMILIES: dict[str, ModelFamily] = {}
_BY_MODEL_TYPE: dict[str, ModelFamily] = {}


def register(family: ModelFamily) -> ModelFamily:
    """Add a family; a name or model_type claimed twice is a programming error."""
    if family.name in _FAMILIES:
        raise ValueError(f"model family {family.name!r} registered twice")
    for model_type in family.model_types:
        if model_type in _BY_MODEL_TYPE:
            raise ValueError(
                f"model_type {model_type!r} claimed by {_BY_MODEL_TYPE[model_type].name!r} "
                f"and {family.name!r}"
            )
    _FAMILIES[family.name] = family
    for model_type in family.model_types:
        _BY_MODEL_TYPE[model_type] = family
    return family


def _load_builtin() -> None:
    for module in BUILTIN_MODULES:
        importlib.import_module(f"ignition.model.families.{module}")


def families() -> list[ModelFamily]:
    _load_builtin()
    return [_FAMILIES[name] for name in sorted(_FAMILIES)]


def get_family(name: str) -> ModelFamily | None:
    """The family a recipe's ``family`` key names, or None when none is implemented."""
    _load_builtin()
    return _FAMILIES.get(name)


def family_for_model_type(model_type: str, source: str) -> ModelFamily:
    _load_builtin()
    if model_type not in _BY_MODEL_TYPE:
        known = ", ".join(sorted(_BY_MODEL_TYPE))
        raise ConfigError(source, f"key 'model_type' = {model_type!r}: unknown (known: {known})")
    return _BY_MODEL_TYPE[model_type]


def family_for_checkpoint(path: Path) -> ModelFamily:
    """The family of checkpoint folder ``path`` by its config.json's required ``model_type``."""
    config_path = path / "config.json"
    raw = read_config_json(config_path)
    if "model_type" not in raw:
        raise ConfigError(str(config_path), "missing key 'model_type' (the model family)")
    model_type = raw["model_type"]
    if not isinstance(model_type, str):
        raise ConfigError(str(config_path), f"key 'model_type' = {model_type!r}: expected str")
    return family_for_model_type(model_type, str(config_path))
