"""Recipe schema: YAML in, frozen dataclasses out, one-line errors.

A recipe declares what a model family can be prepared with: its capacities
(concurrency, prompt buckets, draft depth, token envelopes) and the catalog
sizes those capacities must produce. Raw dicts stop here; everything past this
module reads typed fields. Every error names the file, the dotted key and the
offending value, because a recipe is edited by hand and the first thing a user
needs is where to look.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ignition.recipes.options import SPECULATION_MODES, LoadOptions, parse_load_options

PROMPT_ALIGNMENT = 64
MAX_CONCURRENCY = 64  # Helios selection is bounded to 64 request slots
CATALOG_FAMILIES = (
    "prefill",
    "decode",
    "speculative",
    "mixed_speculative",
    "mixed_ordinary",
    "vision",
)
VISION_PATCH_ALIGNMENT = 64  # whole merge blocks for any merge size up to 8


class RecipeError(ValueError):
    """A recipe file that does not follow the schema."""


@dataclass(frozen=True)
class Supports:
    mixed_capture: bool
    speculation: bool
    vision: bool


@dataclass(frozen=True)
class CapacitySpec:
    """The capacities a recipe prepares by default, and the largest a build may ask for.

    ``concurrency`` and ``speculative_token_capacity`` are the declared defaults (the
    catalog counts CI checks are stated for them); ``max_concurrency`` and
    ``max_speculative_token_capacity`` (``capacity.maxima``) bound what
    ``--concurrency`` and ``--speculative-token-capacity`` may raise them to. A recipe
    without maxima allows no more than its defaults.
    """

    concurrency: int
    max_prefill_chunk: int
    prompt_buckets: tuple[int, ...]
    num_draft_tokens: int
    completion_token_capacity: int
    speculative_token_capacity: int
    kv_page_size: int
    speculation: str
    max_concurrency: int = 0  # 0: the default is the maximum
    max_speculative_token_capacity: int = 0

    def __post_init__(self) -> None:
        if self.max_concurrency == 0:
            object.__setattr__(self, "max_concurrency", self.concurrency)
        if self.max_speculative_token_capacity == 0:
            object.__setattr__(
                self, "max_speculative_token_capacity", self.speculative_token_capacity
            )

    vision_patch_capacities: tuple[int, ...] = ()  # patches per vision program, one each
    vision_max_images: int = 1  # images one vision program may pack together
    # Prompt buckets at which every wider mixed width is prepared besides the seed's one
    # balanced bucket (docs/capacity.md, "Wider mixed buckets and R by slot count"); empty:
    # the seed's rule.
    mixed_wide_prompt_buckets: tuple[int, ...] = ()
    # (concurrency, speculative_token_capacity) steps: a build asking for at least that
    # many slots without --speculative-token-capacity gets that R (docs/capacity.md)
    concurrency_defaults: tuple[tuple[int, int], ...] = ()
    # (prompt bucket, L) pairs: prefill and mixed programs of that bucket are prepared with
    # one prompt lane and with L lanes besides (``capacity.prompt_lanes``); buckets absent
    # carry one prompt
    prompt_lanes: tuple[tuple[int, int], ...] = ()
    # (concurrency, buckets) steps: a build of at least that many slots also prepares these
    # prompt buckets (``concurrency_defaults[i].more_prompt_buckets``; docs/capacity.md,
    # "Finer prompt buckets for serving builds")
    concurrency_prompt_buckets: tuple[tuple[int, tuple[int, ...]], ...] = ()

    def prompt_buckets_for(self, concurrency: int) -> tuple[int, ...]:
        """The prompt buckets a build of ``concurrency`` slots prepares: the declared ones
        and every step's more_prompt_buckets at or below that many slots."""
        more = {
            b
            for slots, extra in self.concurrency_prompt_buckets
            if concurrency >= slots
            for b in extra
        }
        return tuple(sorted({*self.prompt_buckets, *more}))

    def lanes_of(self, bucket: int) -> int:
        """The most prompt lanes the recipe declares for ``bucket`` (1 when it declares none)."""
        return dict(self.prompt_lanes).get(bucket, 1)

    def default_envelope(self, concurrency: int) -> int:
        """R for a build of ``concurrency`` slots that does not choose one."""
        chosen = self.speculative_token_capacity
        for slots, envelope in self.concurrency_defaults:
            if concurrency >= slots:
                chosen = envelope
        return chosen


@dataclass(frozen=True)
class ExpectedCatalog:
    """Program counts per family that a given set of load options must produce."""

    options: LoadOptions
    counts: Mapping[str, int]


@dataclass(frozen=True)
class Recipe:
    name: str
    aliases: tuple[str, ...]
    family: str
    description: str
    supports: Supports
    capacity: CapacitySpec
    expected_catalogs: tuple[ExpectedCatalog, ...]
    path: Path

    def supports_summary(self) -> str:
        parts = []
        if self.supports.mixed_capture:
            parts.append("mixed capture")
        if self.supports.speculation:
            parts.append(f"speculation (D={self.capacity.num_draft_tokens})")
        if self.supports.vision:
            parts.append("vision")
        return ", ".join(parts) or "plain prefill/decode"


class _Reader:
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

    def child(self, key: str) -> _Reader:
        self._used.add(key)
        if key not in self.data:
            self.fail(None, "required key is missing", self.sub(key))
        return _Reader(self.path, self.data[key], self.sub(key))

    def finish(self) -> None:
        for key in self.data:
            if key not in self._used:
                self.fail(self.data[key], "unknown key", self.sub(str(key)))


def _int_list(r: _Reader, key: str, check: Callable[[int], str | None]) -> tuple[int, ...]:
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


def _positive(r: _Reader, key: str, minimum: int = 1, default: Any = ...) -> int:
    value = r.get(key, int, default)
    if value < minimum:
        r.fail(value, f"must be at least {minimum}", r.sub(key))
    return value


def _bucket_rule(value: int) -> str | None:
    if value <= 0 or value % PROMPT_ALIGNMENT:
        return f"a prompt bucket must be a positive multiple of {PROMPT_ALIGNMENT}"
    return None


def _patch_rule(value: int) -> str | None:
    if value <= 0 or value % VISION_PATCH_ALIGNMENT:
        return f"a vision patch capacity must be a positive multiple of {VISION_PATCH_ALIGNMENT}"
    return None


def _parse_capacity(r: _Reader, supports: Supports) -> CapacitySpec:
    buckets = _int_list(r, "prompt_buckets", _bucket_rule)
    if list(buckets) != sorted(set(buckets)):
        r.fail(list(buckets), "prompt buckets must be strictly increasing", r.sub("prompt_buckets"))
    chunk = _positive(r, "max_prefill_chunk")
    if chunk != buckets[-1]:
        r.fail(
            chunk, f"must equal the largest prompt bucket {buckets[-1]}", r.sub("max_prefill_chunk")
        )
    page = _positive(r, "kv_page_size")
    if page & (page - 1):
        r.fail(page, "must be a power of two", r.sub("kv_page_size"))
    draft = _positive(r, "num_draft_tokens", minimum=0)
    if draft and not supports.speculation:
        r.fail(
            draft,
            "a recipe without supports.speculation has no draft tokens",
            r.sub("num_draft_tokens"),
        )
    speculation = r.get("speculation", str, "adaptive" if supports.speculation else "off")
    if speculation not in SPECULATION_MODES:
        r.fail(speculation, f"expected one of {SPECULATION_MODES}", r.sub("speculation"))
    if speculation != "off" and not supports.speculation:
        r.fail(speculation, "supports.speculation is false", r.sub("speculation"))
    concurrency = _positive(r, "concurrency")
    envelope = _positive(r, "speculative_token_capacity")
    max_concurrency, max_envelope = concurrency, envelope
    if "maxima" in r.data:
        m = r.child("maxima")
        max_concurrency = _positive(m, "concurrency", default=concurrency)
        max_envelope = _positive(m, "speculative_token_capacity", default=envelope)
        if max_concurrency < concurrency:
            m.fail(
                max_concurrency,
                f"below the default concurrency {concurrency}",
                m.sub("concurrency"),
            )
        if max_concurrency > MAX_CONCURRENCY:
            m.fail(
                max_concurrency,
                f"selection is bounded to {MAX_CONCURRENCY} request slots",
                m.sub("concurrency"),
            )
        if max_envelope < envelope:
            m.fail(
                max_envelope,
                f"below the default speculative_token_capacity {envelope}",
                m.sub("speculative_token_capacity"),
            )
        m.finish()
    vision_patches: tuple[int, ...] = ()
    if "vision_patch_capacities" in r.data:
        if not supports.vision:
            r.fail(
                r.data["vision_patch_capacities"],
                "a recipe without supports.vision has no vision programs",
                r.sub("vision_patch_capacities"),
            )
        vision_patches = _int_list(r, "vision_patch_capacities", _patch_rule)
        if list(vision_patches) != sorted(set(vision_patches)):
            r.fail(
                list(vision_patches),
                "vision patch capacities must be strictly increasing",
                r.sub("vision_patch_capacities"),
            )
    wide: tuple[int, ...] = ()
    if "mixed_wide_prompt_buckets" in r.data:
        key = r.sub("mixed_wide_prompt_buckets")
        if not (supports.mixed_capture and supports.speculation):
            r.fail(
                r.data["mixed_wide_prompt_buckets"],
                "wider mixed widths need supports.mixed_capture and supports.speculation",
                key,
            )
        wide = _int_list(r, "mixed_wide_prompt_buckets", _bucket_rule)
        if list(wide) != sorted(set(wide)):
            r.fail(list(wide), "must be strictly increasing", key)
        for i, bucket in enumerate(wide):
            if bucket not in buckets:
                r.fail(bucket, f"not one of capacity.prompt_buckets {list(buckets)}", f"{key}[{i}]")
    steps, more_buckets = _concurrency_defaults(
        r, concurrency, max_concurrency, envelope, max_envelope, buckets
    )
    lanes = _prompt_lanes(r, buckets, concurrency)
    spec = CapacitySpec(
        concurrency=concurrency,
        max_prefill_chunk=chunk,
        prompt_buckets=buckets,
        num_draft_tokens=draft,
        completion_token_capacity=_positive(r, "completion_token_capacity", default=8),
        speculative_token_capacity=envelope,
        kv_page_size=page,
        speculation=speculation,
        max_concurrency=max_concurrency,
        max_speculative_token_capacity=max_envelope,
        vision_patch_capacities=vision_patches,
        vision_max_images=_positive(r, "vision_max_images", default=1),
        mixed_wide_prompt_buckets=wide,
        concurrency_defaults=steps,
        prompt_lanes=lanes,
        concurrency_prompt_buckets=more_buckets,
    )
    r.finish()
    return spec


def _prompt_lanes(
    r: _Reader, buckets: tuple[int, ...], concurrency: int
) -> tuple[tuple[int, int], ...]:
    """``capacity.prompt_lanes``: {prompt bucket: L}, L prompts one prefill or mixed program
    of that bucket may carry (1 <= L <= concurrency; buckets absent carry one)."""
    if "prompt_lanes" not in r.data:
        return ()
    key = r.sub("prompt_lanes")
    table = r.get("prompt_lanes", dict)
    pairs = []
    for bucket, lanes in table.items():
        where = f"{key}.{bucket}"
        if isinstance(bucket, bool) or not isinstance(bucket, int) or bucket not in buckets:
            r.fail(bucket, f"not one of capacity.prompt_buckets {list(buckets)}", where)
        if isinstance(lanes, bool) or not isinstance(lanes, int):
            r.fail(lanes, "expected int", where)
        if not 1 <= lanes <= concurrency:
            r.fail(lanes, f"must lie in 1..capacity.concurrency = {concurrency}", where)
        if bucket % lanes:
            r.fail(
                lanes, f"must split the bucket {bucket} evenly (lanes of bucket / L tokens)", where
            )
        pairs.append((bucket, lanes))
    return tuple(sorted(pairs))


def _concurrency_defaults(
    r: _Reader,
    concurrency: int,
    max_concurrency: int,
    envelope: int,
    max_envelope: int,
    buckets: tuple[int, ...],
) -> tuple[tuple[tuple[int, int], ...], tuple[tuple[int, tuple[int, ...]], ...]]:
    """``capacity.concurrency_defaults``: a list of {concurrency, speculative_token_capacity,
    optional more_prompt_buckets} steps above the declared default, increasing, within the
    maxima; returns the (slots, R) steps and the (slots, buckets) ones."""
    if "concurrency_defaults" not in r.data:
        return (), ()
    steps: list[tuple[int, int]] = []
    more: list[tuple[int, tuple[int, ...]]] = []
    known = set(buckets)
    previous = (concurrency, envelope)
    for i, raw in enumerate(r.get("concurrency_defaults", list)):
        item = _Reader(r.path, raw, f"{r.sub('concurrency_defaults')}[{i}]")
        slots = _positive(item, "concurrency")
        value = _positive(item, "speculative_token_capacity")
        if slots <= previous[0] or slots > max_concurrency:
            item.fail(
                slots,
                f"must exceed {previous[0]} and be at most capacity.maxima.concurrency "
                f"{max_concurrency}",
                item.sub("concurrency"),
            )
        if value < previous[1] or value > max_envelope:
            item.fail(
                value,
                f"must be at least {previous[1]} and at most "
                f"capacity.maxima.speculative_token_capacity {max_envelope}",
                item.sub("speculative_token_capacity"),
            )
        if "more_prompt_buckets" in item.data:
            extra = _more_prompt_buckets(item, known, buckets[-1])
            known.update(extra)
            more.append((slots, extra))
        item.finish()
        steps.append((slots, value))
        previous = (slots, value)
    return tuple(steps), tuple(more)


def _more_prompt_buckets(item: _Reader, known: set[int], largest: int) -> tuple[int, ...]:
    """One step's more_prompt_buckets: strictly increasing multiples of the prompt alignment
    below the largest prompt bucket (max_prefill_chunk stays the largest), none already
    declared (by capacity.prompt_buckets or an earlier step)."""
    key = item.sub("more_prompt_buckets")
    extra = _int_list(item, "more_prompt_buckets", _bucket_rule)
    if list(extra) != sorted(set(extra)):
        item.fail(list(extra), "must be strictly increasing", key)
    for i, bucket in enumerate(extra):
        if bucket in known:
            why = "already a prompt bucket (capacity.prompt_buckets or an earlier step)"
            item.fail(bucket, why, f"{key}[{i}]")
        if bucket >= largest:
            item.fail(bucket, f"must lie below the largest prompt bucket {largest}", f"{key}[{i}]")
    return extra


def parse_recipe(data: Any, path: Path) -> Recipe:
    """Validate a loaded YAML document; raise RecipeError on the first problem."""
    top = _Reader(path, data)
    name = top.get("name", str)
    aliases = top.get("aliases", list, [])
    for i, alias in enumerate(aliases):
        if not isinstance(alias, str) or not alias:
            top.fail(alias, "an alias must be a non-empty string", f"aliases[{i}]")
    sup = top.child("supports")
    supports = Supports(
        mixed_capture=sup.get("mixed_capture", bool),
        speculation=sup.get("speculation", bool),
        vision=sup.get("vision", bool, False),
    )
    sup.finish()
    capacity = _parse_capacity(top.child("capacity"), supports)
    expected = []
    for i, raw in enumerate(top.get("expected_catalogs", list, [])):
        item = _Reader(path, raw, f"expected_catalogs[{i}]")
        try:
            options = parse_load_options(item.get("options", dict, {}), item.sub("options"))
        except ValueError as err:
            raise RecipeError(f"{path}: key {err}") from None
        if options.mixed_prefill and not supports.mixed_capture:
            item.fail(
                True,
                "mixed capture asked of a recipe whose supports.mixed_capture is false",
                item.sub("options.mixed_prefill"),
            )
        counts = item.child("counts")
        parsed = {}
        for family in counts.data:
            if family not in CATALOG_FAMILIES:
                counts.fail(
                    counts.data[family],
                    f"unknown family (known: {', '.join(CATALOG_FAMILIES)})",
                    counts.sub(str(family)),
                )
            parsed[family] = _positive(counts, family, minimum=0)
        counts.finish()
        item.finish()
        expected.append(ExpectedCatalog(options=options, counts=parsed))
    recipe = Recipe(
        name=name,
        aliases=tuple(aliases),
        family=top.get("family", str),
        description=top.get("description", str, ""),
        supports=supports,
        capacity=capacity,
        expected_catalogs=tuple(expected),
        path=path,
    )
    top.finish()
    return recipe


def load_recipe_file(path: str | Path) -> Recipe:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise RecipeError(f"{path}: no such recipe file") from None
    except yaml.YAMLError as err:
        raise RecipeError(f"{path}: not valid YAML ({' '.join(str(err).split())})") from None
    return parse_recipe(data, path)
