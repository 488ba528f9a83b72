"""Recipe schema: YAML in, frozen dataclasses out, one-line errors.

A recipe declares a family's capacities and the catalog sizes they must produce. Raw dicts
stop here; every error names the file, the dotted key and the value.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ignition.recipes.concurrency_steps import parse_concurrency_steps, parse_prompt_lanes
from ignition.recipes.options import SPECULATION_MODES, LoadOptions, parse_load_options
from ignition.recipes.reader import PROMPT_ALIGNMENT, RecipeError
from ignition.recipes.reader import Reader as _Reader
from ignition.recipes.reader import bucket_rule as _bucket_rule
from ignition.recipes.reader import bucket_subset
from ignition.recipes.reader import int_list as _int_list
from ignition.recipes.reader import positive as _positive

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


@dataclass(frozen=True)
class Supports:
    mixed_capture: bool
    speculation: bool
    vision: bool


@dataclass(frozen=True)
class CapacitySpec:
    """The capacities a recipe prepares by default, and the largest a build may ask for.

    ``concurrency`` / ``speculative_token_capacity`` are the defaults the catalog counts are
    stated for; ``capacity.maxima`` bounds the flags that raise them (none: the defaults).
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
    # Buckets preparing every wider mixed width besides the seed's (docs/capacity.md)
    mixed_wide_prompt_buckets: tuple[int, ...] = ()
    # (concurrency, R) steps: the default R of builds of at least that many slots
    concurrency_defaults: tuple[tuple[int, int], ...] = ()
    # (prompt bucket, L): that bucket's prefill and mixed programs also get L prompt lanes
    prompt_lanes: tuple[tuple[int, int], ...] = ()
    # (concurrency, buckets) steps: more prompt buckets for builds of that many slots
    concurrency_prompt_buckets: tuple[tuple[int, tuple[int, ...]], ...] = ()
    # (concurrency, lanes) steps: prompt lanes merged over capacity.prompt_lanes
    concurrency_prompt_lanes: tuple[tuple[int, tuple[tuple[int, int], ...]], ...] = ()
    # (concurrency, buckets) steps: a build of at least that many slots also prepares every
    # wider mixed width at these prompt buckets (``concurrency_defaults[i].
    # mixed_wide_prompt_buckets``; docs/scheduling.md, "Mixed frames at the generation rate")
    concurrency_mixed_wide: tuple[tuple[int, tuple[int, ...]], ...] = ()
    # (concurrency, step) steps: the decode and speculative batch grid of builds of at least
    # that many slots (components/batch_buckets.py; 0, the seed's, is powers of two)
    concurrency_batch_step: tuple[tuple[int, int], ...] = ()

    def batch_bucket_step_for(self, concurrency: int) -> int:
        """The batch grid step of a build of ``concurrency`` slots: the last step's at or
        below that many slots, else 0 (powers of two)."""
        chosen = 0
        for slots, step in self.concurrency_batch_step:
            if concurrency >= slots:
                chosen = step
        return chosen

    def mixed_wide_prompt_buckets_for(self, concurrency: int) -> tuple[int, ...]:
        """The wide mixed buckets of a build of ``concurrency`` slots: the declared ones and
        every step's at or below that many slots."""
        more = {
            b for slots, wide in self.concurrency_mixed_wide if concurrency >= slots for b in wide
        }
        return tuple(sorted({*self.mixed_wide_prompt_buckets, *more}))

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

    def prompt_lanes_for(self, concurrency: int) -> tuple[tuple[int, int], ...]:
        """The (bucket, L) lanes a build of ``concurrency`` slots declares: capacity.prompt_lanes
        with every step's prompt_lanes at or below that many slots merged over it in order."""
        table = dict(self.prompt_lanes)
        for slots, lanes in self.concurrency_prompt_lanes:
            if concurrency >= slots:
                table.update(lanes)
        return tuple(sorted(table.items()))

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
        wide = bucket_subset(
            r, "mixed_wide_prompt_buckets", buckets, "one of capacity.prompt_buckets"
        )
    steps = parse_concurrency_steps(
        r, concurrency, max_concurrency, envelope, max_envelope, buckets
    )
    lanes: tuple[tuple[int, int], ...] = ()
    if "prompt_lanes" in r.data:
        lanes = parse_prompt_lanes(
            r,
            "prompt_lanes",
            set(buckets),
            "capacity.prompt_buckets",
            concurrency,
            "capacity.concurrency",
        )
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
        concurrency_defaults=steps.envelopes,
        prompt_lanes=lanes,
        concurrency_prompt_buckets=steps.buckets,
        concurrency_prompt_lanes=steps.lanes,
        concurrency_mixed_wide=steps.wide,
        concurrency_batch_step=steps.batch_steps,
    )
    r.finish()
    return spec


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
