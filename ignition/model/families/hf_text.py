"""Reading the text part of a Hugging Face config.json (nested ``text_config`` or flat; both
rope spellings), shared by the published families."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ignition.model.config import ConfigError
from ignition.model.families.base import require


def text_section(raw: Mapping[str, Any], source: str) -> tuple[Mapping[str, Any], str]:
    """(the text config, the prefix its keys are reported under)."""
    if "text_config" not in raw:
        return raw, ""
    text = raw["text_config"]
    if not isinstance(text, Mapping):
        raise ConfigError(source, f"key 'text_config' = {text!r}: expected an object")
    return text, "text_config."


class TextReader:
    """Typed keys of a text config, with errors that name the nested key."""

    def __init__(self, text: Mapping[str, Any], prefix: str, source: str) -> None:
        self.text, self.prefix, self.source = text, prefix, source

    def int(self, key: str, default: int | None = None) -> int:
        if key not in self.text and default is not None:
            return default
        try:
            value = require(self.text, key, self.source, int)
        except ConfigError as exc:
            detail = exc.detail.replace(repr(key), repr(self.prefix + key))
            raise ConfigError(self.source, detail) from None
        if value <= 0:
            raise ConfigError(self.source, f"key '{self.prefix}{key}' = {value}: must be positive")
        return value

    def float(self, key: str, default: float) -> float:
        value = self.text.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ConfigError(self.source, f"key '{self.prefix}{key}' = {value!r}: must be > 0")
        return float(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self.text.get(key, default)
        if not isinstance(value, bool):
            raise ConfigError(self.source, f"key '{self.prefix}{key}' = {value!r}: expected bool")
        return value

    def activation(self, key: str = "hidden_act", default: str = "silu") -> str:
        """An activation ``kernels.activations`` computes; any other is refused."""
        from ignition.kernels.activations import ACTIVATIONS

        value = self.text.get(key, default)
        if value not in ACTIVATIONS:
            raise ConfigError(
                self.source,
                f"key '{self.prefix}{key}' = {value!r}: unsupported activation (supported: "
                f"{', '.join(ACTIVATIONS)})",
            )
        return value

    def unsupported_true(self, *keys: str) -> None:
        for key in keys:
            if self.text.get(key):
                raise ConfigError(
                    self.source, f"key '{self.prefix}{key}' = true: not supported by this family"
                )

    def rope(self) -> Mapping[str, Any]:
        """rope_parameters (transformers 5) merged over the older top-level rope keys."""
        merged: dict[str, Any] = {}
        for key in ("rope_theta", "partial_rotary_factor"):
            if key in self.text:
                merged[key] = self.text[key]
        for key in ("rope_scaling", "rope_parameters"):
            value = self.text.get(key)
            if isinstance(value, Mapping):
                merged.update(value)
            elif value is not None:
                raise ConfigError(
                    self.source, f"key '{self.prefix}{key}' = {value!r}: expected an object"
                )
        if "type" in merged and "rope_type" not in merged:
            merged["rope_type"] = merged["type"]
        return merged

    def token_ids(self, outer: Mapping[str, Any]) -> dict[str, Any]:
        """bos/eos/pad ids from the text config, else the outer config."""
        ids = {}
        for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
            value = self.text.get(key, outer.get(key))
            ids[key] = tuple(value) if isinstance(value, list) else value
        return ids
