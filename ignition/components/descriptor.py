"""A prepared program's descriptor: the serialized contract between build and serve time,
validated on construction so a bad catalog fails with one line naming the field."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ignition.components.program_kinds import (
    MAX_MIXED_BATCH,
    PROMPT_ALIGNMENT,
    CatalogError,
    GraphKind,
    ValueSource,
)


@dataclass(frozen=True)
class Descriptor:
    """One prepared physical program, identified by its capacities.

    ``estimated_duration_ns`` is for reports only; loading resets it to 0 ("unknown").
    ``prompt_lanes`` (L): prompts a prefill or mixed program carries at once, each a chunk
    of at most ``lane_capacity`` = P / L tokens of the shared prompt bucket; a mixed
    program keeps one of its B rows for a decoder; unused lanes (row -1) mutate nothing.
    """

    kind: GraphKind
    batch_capacity: int
    proposal_depth: int
    token_capacity: int
    packed_capacity: int
    prefill_capacity: int = 0
    confidence_width: int = 0
    speculation_enabled: bool = False
    # a factory: CPython 3.11 specializes no read of a field whose class holds an enum member
    value_source: ValueSource = field(default_factory=lambda: ValueSource.QUERY_LENGTH)
    estimated_duration_ns: int = 0
    max_packed_extent: int = field(default=-1)
    prompt_lanes: int = 1

    def __post_init__(self) -> None:
        if self.max_packed_extent == -1:
            object.__setattr__(self, "max_packed_extent", self.expected_packed_extent())
        validate_descriptor(self)

    @property
    def is_mixed(self) -> bool:
        return self.kind is GraphKind.MIXED

    @property
    def patch_capacity(self) -> int:
        """Patches a vision program encodes per run (0 for text programs)."""
        return self.packed_capacity if self.kind is GraphKind.VISION else 0

    @property
    def is_device_allocated(self) -> bool:
        return self.value_source is ValueSource.SPECULATIVE_PREFIX_LIMIT

    @property
    def name(self) -> str:
        """A stable, human-readable program id, unique within a catalog."""
        parts = [self.kind.value]
        if self.kind in (GraphKind.SPECULATIVE, GraphKind.MIXED):
            parts.append("spec" if self.speculation_enabled else "plain")
        parts += [
            f"b{self.batch_capacity}",
            f"d{self.proposal_depth}",
            f"w{self.token_capacity}",
            f"p{self.packed_capacity}",
        ]
        if self.prefill_capacity:
            parts.append(f"c{self.prefill_capacity}")
        if self.is_device_allocated:
            parts.append("dev")
        if self.prompt_lanes > 1:
            parts.append(f"l{self.prompt_lanes}")
        return "-".join(parts)

    @property
    def prompt_capacity(self) -> int:
        """Prompt tokens the program's lanes share (0: it carries no prompt)."""
        if self.kind is GraphKind.PREFILL:
            return self.token_capacity
        return self.prefill_capacity if self.kind is GraphKind.MIXED else 0

    @property
    def lane_capacity(self) -> int:
        """The most prompt tokens one lane's chunk may take: P / L (P with one lane)."""
        return self.prompt_capacity // self.prompt_lanes

    @property
    def verify_rows(self) -> int:
        """The most rows one lane of a round verifies: min(D + 1, W), its proposals and
        the pending token within the program's width (1 without speculation, where the
        descriptor's rules make W = 1 or D = 0)."""
        return min(self.proposal_depth + 1, self.token_capacity)

    @property
    def row_capacity(self) -> int:
        """Physical rows of the packed program: a prefill program's lanes, else B."""
        return self.prompt_lanes if self.kind is GraphKind.PREFILL else self.batch_capacity

    def cost_key(self) -> tuple[str, int, int, int, int, int, bool, str, int]:
        """Identity of a cost entry: active row count never changes it."""
        return (
            self.kind.value,
            self.batch_capacity,
            self.token_capacity,
            self.proposal_depth,
            self.prefill_capacity,
            self.packed_capacity,
            self.speculation_enabled,
            self.value_source.value,
            self.prompt_lanes,
        )

    def expected_packed_extent(self) -> int:
        """Largest packed token count the program may see (its capture headroom)."""
        if self.kind is GraphKind.MIXED:
            return self.prefill_capacity + (self.batch_capacity - 1) * self.token_capacity
        if self.kind is GraphKind.VISION:
            return 0
        return self.packed_capacity

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["kind"] = self.kind.value
        data["value_source"] = self.value_source.value
        if self.prompt_lanes == 1:  # the seed's catalogs, byte for byte
            del data["prompt_lanes"]
        return data


_INT_FIELDS = (
    "batch_capacity",
    "proposal_depth",
    "token_capacity",
    "packed_capacity",
    "prefill_capacity",
    "confidence_width",
    "estimated_duration_ns",
    "max_packed_extent",
    "prompt_lanes",
)


_GENERATION_KINDS = (GraphKind.DECODE, GraphKind.SPECULATIVE, GraphKind.MIXED)


def validate_descriptor(d: Descriptor, where: str = "descriptor") -> None:
    """Check the contract of one descriptor; raise CatalogError naming the field."""

    def fail(name: str, value: object, why: str) -> None:
        raise CatalogError(f"{where}: field {name!r} = {value!r}: {why}")

    if not isinstance(d.kind, GraphKind):
        fail("kind", d.kind, f"expected one of {[k.value for k in GraphKind]}")
    if not isinstance(d.value_source, ValueSource):
        fail("value_source", d.value_source, f"expected one of {[v.value for v in ValueSource]}")
    if not isinstance(d.speculation_enabled, bool):
        fail("speculation_enabled", d.speculation_enabled, "expected a boolean")
    for name in _INT_FIELDS:
        value = getattr(d, name)
        if isinstance(value, bool) or not isinstance(value, int):
            fail(name, value, "expected an integer")
        if value < 0:
            fail(name, value, "must be nonnegative")
    for name in ("batch_capacity", "token_capacity", "packed_capacity"):
        if getattr(d, name) < 1:
            fail(name, getattr(d, name), "must be at least 1")

    B, D, W, P = d.batch_capacity, d.proposal_depth, d.token_capacity, d.packed_capacity
    if P > B * W:
        fail("packed_capacity", P, f"exceeds batch_capacity x token_capacity = {B * W}")
    if d.kind in _GENERATION_KINDS and P < B:
        fail("packed_capacity", P, f"below batch_capacity {B}: every lane keeps its pending token")
    if W > D + 1 and d.kind in (GraphKind.SPECULATIVE, GraphKind.MIXED) and d.speculation_enabled:
        fail("token_capacity", W, f"exceeds proposal_depth + 1 = {D + 1}")
    if d.confidence_width not in (0, D):
        fail("confidence_width", d.confidence_width, f"must be 0 or proposal_depth {D}")

    if d.kind is GraphKind.MIXED:
        C = d.prefill_capacity
        if C < PROMPT_ALIGNMENT or C % PROMPT_ALIGNMENT:
            fail(
                "prefill_capacity",
                C,
                f"a mixed program needs a positive multiple of {PROMPT_ALIGNMENT}",
            )
        if C < W:
            fail(
                "prefill_capacity",
                C,
                f"below token_capacity {W}: a decode-only population must fit",
            )
        if not (2 <= B <= MAX_MIXED_BATCH) or B & (B - 1):
            fail(
                "batch_capacity", B, f"a mixed program needs a power of two in 2..{MAX_MIXED_BATCH}"
            )
    elif d.prefill_capacity:
        fail(
            "prefill_capacity",
            d.prefill_capacity,
            f"only mixed programs have one, not {d.kind.value}",
        )

    if d.kind is GraphKind.VISION and (W != P or D or d.speculation_enabled):
        fail("token_capacity", W, f"a vision program has W = P = patches ({P}) and no proposals")
    if d.kind is GraphKind.DECODE and (W != 1 or D != 0 or d.speculation_enabled):
        fail("token_capacity", W, "ordinary decode is width one with no proposals")
    if d.kind in (GraphKind.PREFILL, GraphKind.DECODE) and D:
        fail("proposal_depth", D, f"{d.kind.value} programs make no proposals")
    if d.kind in _GENERATION_KINDS and W > 1 and not d.speculation_enabled:
        fail("token_capacity", W, "width above one needs speculation_enabled")
    speculative_with_proposals = d.kind is GraphKind.SPECULATIVE and d.speculation_enabled and D > 0
    if d.is_device_allocated and not speculative_with_proposals:
        fail(
            "value_source",
            d.value_source.value,
            "device allocation needs a speculative program with proposals",
        )
    if d.prompt_lanes < 1:
        fail("prompt_lanes", d.prompt_lanes, "must be at least 1")
    if d.prompt_lanes > 1 and d.kind not in (GraphKind.PREFILL, GraphKind.MIXED):
        fail("prompt_lanes", d.prompt_lanes, "only prefill and mixed programs carry prompts")
    if d.kind is GraphKind.MIXED and d.prompt_lanes >= B:
        fail("prompt_lanes", d.prompt_lanes, f"a mixed program keeps a decoder row (B = {B})")
    if d.prompt_lanes > 1 and d.prompt_capacity % d.prompt_lanes:
        fail(
            "prompt_lanes",
            d.prompt_lanes,
            f"must split the prompt bucket {d.prompt_capacity} evenly",
        )
    if d.max_packed_extent != d.expected_packed_extent():
        fail("max_packed_extent", d.max_packed_extent, f"expected {d.expected_packed_extent()}")
