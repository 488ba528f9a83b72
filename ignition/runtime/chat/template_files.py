"""Where a checkpoint's chat templates come from, found the way transformers finds them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

CHAT_TEMPLATE_FILE = "chat_template.jinja"
CHAT_TEMPLATE_DIR = "additional_chat_templates"
SPECIAL_TOKEN_NAMES = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
)
FALLBACK_TEMPLATE = "chat_fallback.jinja"


class ChatTemplateFileError(ValueError):
    """A checkpoint's chat template files are malformed (a bundle error, found at load)."""


@dataclass(frozen=True)
class ChatTemplates:
    """The templates a checkpoint declares, by name, with the special tokens they may read."""

    templates: Mapping[str, str]
    source: str
    special_tokens: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.templates:
            raise ChatTemplateFileError(f"{self.source}: declares no chat template")
        if len(self.templates) > 1 and "default" not in self.templates:
            raise ChatTemplateFileError(
                f"{self.source}: several chat templates ({', '.join(sorted(self.templates))}) "
                "and none is named 'default'"
            )

    def select(self, has_tools: bool) -> tuple[str, str]:
        """(name, template source) to render with, following transformers' choice."""
        if has_tools and "tool_use" in self.templates:
            return "tool_use", self.templates["tool_use"]
        if "default" in self.templates:
            return "default", self.templates["default"]
        return next(iter(self.templates.items()))  # the only one (__post_init__)

    @classmethod
    def fallback(cls, special_tokens: Mapping[str, str] | None = None) -> ChatTemplates:
        """The packaged template used when a checkpoint declares none."""
        text = resources.files("ignition").joinpath("templates", FALLBACK_TEMPLATE).read_text()
        where = f"ignition/templates/{FALLBACK_TEMPLATE}"
        return cls({"default": text}, where, special_tokens or {})


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer_config.json writes it: a string or an AddedToken dict."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def special_tokens_of(tokenizer_config: Mapping[str, Any]) -> dict[str, str]:
    tokens = {name: _token_text(tokenizer_config.get(name)) for name in SPECIAL_TOKEN_NAMES}
    return {name: text for name, text in tokens.items() if text is not None}


def _configured_templates(value: Any, where: str) -> dict[str, str]:
    """tokenizer_config.json's ``chat_template``: a string or a list of {name, template}."""
    if isinstance(value, str):
        return {"default": value}
    if not isinstance(value, list):
        raise ChatTemplateFileError(
            f"{where}: chat_template must be a string or a list of {{name, template}}, "
            f"got {type(value).__name__}"
        )
    named: dict[str, str] = {}
    for i, entry in enumerate(value):
        if not (
            isinstance(entry, Mapping)
            and isinstance(entry.get("name"), str)
            and isinstance(entry.get("template"), str)
        ):
            raise ChatTemplateFileError(
                f"{where}: chat_template[{i}] must be an object with string 'name' and 'template'"
            )
        named[entry["name"]] = entry["template"]
    return named


def _read_template(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ChatTemplateFileError(f"{path}: not UTF-8 text ({err.reason})") from None


def load_chat_templates(folder: Path, tokenizer_config: Mapping[str, Any]) -> ChatTemplates:
    """The folder's templates, as transformers' ``from_pretrained`` finds them, or the fallback."""
    special = special_tokens_of(tokenizer_config)
    files: dict[str, str] = {}
    if (folder / CHAT_TEMPLATE_FILE).is_file():
        files["default"] = _read_template(folder / CHAT_TEMPLATE_FILE)
    if (folder / CHAT_TEMPLATE_DIR).is_dir():
        for path in sorted((folder / CHAT_TEMPLATE_DIR).glob("*.jinja")):
            files[path.name.removesuffix(".jinja")] = _read_template(path)
    if files:
        where = folder / (CHAT_TEMPLATE_FILE if "default" in files else CHAT_TEMPLATE_DIR)
        return ChatTemplates(files, str(where), special)
    configured = tokenizer_config.get("chat_template")
    if configured is None:
        return ChatTemplates.fallback(special)
    where = str(folder / "tokenizer_config.json")
    return ChatTemplates(_configured_templates(configured, where), where, special)
