"""The graph catalog: a recipe's prepared programs, counted per family, and its versioned
JSON file. Loading validates every field and resets every measured duration to unknown."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import CatalogError, GraphKind, ValueSource

CATALOG_FORMAT = "ignition-catalog"
CATALOG_VERSION = 1


@dataclass(frozen=True)
class Catalog:
    """A recipe's prepared programs plus the options that produced them."""

    recipe: str
    options: Mapping[str, Any]
    descriptors: tuple[Descriptor, ...]

    def __post_init__(self) -> None:
        seen: dict[str, int] = {}
        for i, d in enumerate(self.descriptors):
            if d.name in seen:
                raise CatalogError(
                    f"descriptors[{i}]: duplicates descriptors[{seen[d.name]}] ({d.name})"
                )
            seen[d.name] = i

    def of_kind(self, kind: GraphKind) -> list[Descriptor]:
        return [d for d in self.descriptors if d.kind is kind]

    def counts(self) -> dict[str, int]:
        """Program counts per family, the numbers recipes declare and CI checks."""
        return count_families(self.descriptors)

    def max_packed_extent(self) -> int:
        return max((d.max_packed_extent for d in self.descriptors), default=0)

    def max_patch_capacity(self) -> int:
        """The most patches one prepared vision program encodes (0: no vision programs)."""
        return max((d.patch_capacity for d in self.descriptors), default=0)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": CATALOG_FORMAT,
            "version": CATALOG_VERSION,
            "recipe": self.recipe,
            "options": dict(self.options),
            "counts": self.counts(),
            "descriptors": [d.to_json() for d in self.descriptors],
        }


FAMILIES = ("prefill", "decode", "speculative", "mixed_speculative", "mixed_ordinary", "vision")


def family_of(d: Descriptor) -> str:
    if d.kind is GraphKind.MIXED:
        return "mixed_speculative" if d.speculation_enabled else "mixed_ordinary"
    return d.kind.value


def count_families(descriptors: Iterable[Descriptor]) -> dict[str, int]:
    counts = dict.fromkeys(FAMILIES, 0)
    for d in descriptors:
        family = family_of(d)
        counts[family] = counts.get(family, 0) + 1
    return counts


def descriptor_from_json(data: Mapping[str, Any], where: str = "descriptor") -> Descriptor:
    if not isinstance(data, Mapping):
        raise CatalogError(f"{where}: expected an object, got {type(data).__name__}")
    known = {f.name for f in fields(Descriptor)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise CatalogError(f"{where}: unknown field {unknown[0]!r}")
    missing = sorted(known - set(data) - {"prompt_lanes"})  # older catalogs: one lane
    if missing:
        raise CatalogError(f"{where}: field {missing[0]!r} is missing")
    values = dict(data)
    for name, enum in (("kind", GraphKind), ("value_source", ValueSource)):
        try:
            values[name] = enum(values[name])
        except ValueError:
            raise CatalogError(
                f"{where}: field {name!r} = {data[name]!r}: expected one of "
                f"{[member.value for member in enum]}"
            ) from None
    try:
        return Descriptor(**values)
    except CatalogError as err:
        raise CatalogError(str(err).replace("descriptor:", f"{where}:", 1)) from None


def catalog_from_json(data: Mapping[str, Any], where: str = "catalog") -> Catalog:
    """Parse and validate a catalog; every estimated duration starts unknown (zero)."""
    if not isinstance(data, Mapping):
        raise CatalogError(f"{where}: expected a JSON object")
    if data.get("format") != CATALOG_FORMAT:
        raise CatalogError(
            f"{where}: field 'format' = {data.get('format')!r}: expected {CATALOG_FORMAT!r}"
        )
    if data.get("version") != CATALOG_VERSION:
        raise CatalogError(
            f"{where}: field 'version' = {data.get('version')!r}: this build reads version "
            f"{CATALOG_VERSION}"
        )
    for key in ("recipe", "options", "descriptors"):
        if key not in data:
            raise CatalogError(f"{where}: field {key!r} is missing")
    if not isinstance(data["descriptors"], list):
        raise CatalogError(f"{where}: field 'descriptors' must be a list")
    descriptors = tuple(
        replace(descriptor_from_json(item, f"{where}: descriptors[{i}]"), estimated_duration_ns=0)
        for i, item in enumerate(data["descriptors"])
    )
    try:
        return Catalog(
            recipe=str(data["recipe"]), options=dict(data["options"]), descriptors=descriptors
        )
    except CatalogError as err:
        raise CatalogError(f"{where}: {err}") from None


def save_catalog(catalog: Catalog, path: str | Path) -> None:
    Path(path).write_text(json.dumps(catalog.to_json(), indent=2) + "\n")


def load_catalog(path: str | Path) -> Catalog:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise CatalogError(f"{path}: no such catalog file") from None
    except json.JSONDecodeError as err:
        raise CatalogError(f"{path}: not valid JSON ({err})") from None
    return catalog_from_json(data, str(path))
