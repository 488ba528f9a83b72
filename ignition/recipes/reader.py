"""Typed reading of a recipe's YAML mapping with one-line errors naming the file, the dotted
key and the offending value (shared by the schema and its step parser)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

PROMPT_ALIGNMENT = 64


class RecipeError(ValueError):
    """A recipe file that does not follow the schema."""


class Reader:
    """Typed access to a YAML mapping that remembers the dotted key for errors."""

    def __init__(self, path: Path, data: Any, key: str = "") -> None:
        self.path, self.data, self.key = path, data, key
        if not isinstance(data, Mapping):
            self.fail(data, "expected a mapping")
        self._used: set[str] = set()

    def fail(self, value: Any, why: str, key: str | None = None) -> None:
        name = key if key is not None else self.key or "<top level>"
        raise RecipeError(f"{self.path}: key '{name}' = {value!r}: {why}")

    def sub(self, key: str) -> str:
        return f"{self.key}.{key}" if self.key else key

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
        self._used.add(key)
        if key not in self.data:
            if default is ...:
                self.fail(None, "required key is missing", self.sub(key))
            return default
        value = self.data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if (bool not in kinds and isinstance(value, bool)) or not isinstance(value, kinds):
            names = " or ".join(k.__name__ for k in kinds)
            self.fail(value, f"expected {names}", self.sub(key))
        return value

    def child(self, key: str) -> Reader:
        self._used.add(key)
        if key not in self.data:
            self.fail(None, "required key is missing", self.sub(key))
        return Reader(self.path, self.data[key], self.sub(key))

    def finish(self) -> None:
        for key in self.data:
            if key not in self._used:
                self.fail(self.data[key], "unknown key", self.sub(str(key)))


def int_list(r: Reader, key: str, check: Callable[[int], str | None]) -> tuple[int, ...]:
    items = r.get(key, list)
    if not items:
        r.fail(items, "must not be empty", r.sub(key))
    for i, item in enumerate(items):
        if isinstance(item, bool) or not isinstance(item, int):
            r.fail(item, "expected int", f"{r.sub(key)}[{i}]")
        why = check(item)
        if why:
            r.fail(item, why, f"{r.sub(key)}[{i}]")
    return tuple(items)


def positive(r: Reader, key: str, minimum: int = 1, default: Any = ...) -> int:
    value = r.get(key, int, default)
    if value < minimum:
        r.fail(value, f"must be at least {minimum}", r.sub(key))
    return value


def bucket_rule(value: int) -> str | None:
    if value <= 0 or value % PROMPT_ALIGNMENT:
        return f"a prompt bucket must be a positive multiple of {PROMPT_ALIGNMENT}"
    return None


def bucket_subset(r: Reader, key: str, known: Iterable[int], known_as: str) -> tuple[int, ...]:
    """``key``: strictly increasing prompt buckets, each one of ``known`` (a failure names
    the value and ``known_as``, e.g. "one of capacity.prompt_buckets")."""
    values = int_list(r, key, bucket_rule)
    if list(values) != sorted(set(values)):
        r.fail(list(values), "must be strictly increasing", r.sub(key))
    allowed = sorted(known)
    for i, bucket in enumerate(values):
        if bucket not in allowed:
            r.fail(bucket, f"not {known_as} {allowed}", f"{r.sub(key)}[{i}]")
    return values
