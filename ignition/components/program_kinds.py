"""The catalog's vocabulary: program kinds, who allocates rows, limits, and its error."""

from __future__ import annotations

from enum import StrEnum

PROMPT_ALIGNMENT = 64
MAX_MIXED_BATCH = 64


class CatalogError(ValueError):
    """A catalog or descriptor that violates the build/runtime contract."""


class GraphKind(StrEnum):
    """Physical program families. A ``vision`` program encodes at most ``packed_capacity``
    patches (W = P, B images), packs no text and is never a Helios round."""

    PREFILL = "prefill"
    DECODE = "decode"
    SPECULATIVE = "speculative"
    MIXED = "mixed"
    SNAPSHOT = "snapshot"
    RESTORE = "restore"
    INIT = "init"  # a fresh request's zero state: a restore from nothing
    VISION = "vision"


class ValueSource(StrEnum):
    """Who allocates a program's target rows: the host, as exact per-lane lengths summing
    to at most P (``query_length``), or the device within P from its proposal confidence
    under host lane ceilings (``speculative_prefix_limit``)."""

    QUERY_LENGTH = "query_length"
    SPECULATIVE_PREFIX_LIMIT = "speculative_prefix_limit"
