"""Load-time options: what a user may change about a recipe's capacities.

Options can only *reduce* what a recipe declares (the programs must exist), so
every field is optional and ``None`` means "the recipe's value". The recipe
schema validates the options that recipes themselves quote in
``expected_catalogs`` with the same table, which is why it lives here and not
in ``components``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

SPECULATION_MODES = ("off", "fixed", "adaptive")
# Storage of QSA's compressed index keys (vLLM's ``indexer_kv_dtype``): "auto" keeps the
# model's dtype; "fp8" (e4m3) halves the indexer's cache and its reads, at a small error in
# the block scores (tests/model/test_qsa_fp8_index_keys.py). The torch dtypes are
# ``ignition.model.state.INDEX_KEY_DTYPES`` (this room imports no torch).
INDEXER_KV_DTYPES = ("auto", "bf16", "fp8")


@dataclass(frozen=True)
class LoadOptions:
    """Capacity overrides chosen when building or loading a catalog."""

    mixed_prefill: bool = False
    concurrency: int | None = None
    speculative_token_capacity: int | None = None
    num_draft_tokens: int | None = None
    max_prefill_chunk: int | None = None
    speculation: str | None = None
    # prompt buckets at which every wider mixed width is also prepared (None: the recipe's
    # capacity.mixed_wide_prompt_buckets; () prepares only the seed's balanced bucket)
    mixed_wide_prompt_buckets: tuple[int, ...] | None = None
    # QSA index-key storage (None: "auto", the model's dtype); one of INDEXER_KV_DTYPES
    indexer_kv_dtype: str | None = None
    # (prompt bucket, L) pairs: the prompt lanes a build prepares (None: the recipe's
    # capacity.prompt_lanes; () prepares one lane everywhere)
    prompt_lanes: tuple[tuple[int, int], ...] | None = None

    def __post_init__(self) -> None:
        check_indexer_kv_dtype("indexer_kv_dtype", self.indexer_kv_dtype)

    def to_json(self) -> dict[str, Any]:
        """The options a user set, omitting the ones left to the recipe."""
        out = {k: v for k, v in asdict(self).items() if v is not None and v is not False}
        if "mixed_wide_prompt_buckets" in out:
            out["mixed_wide_prompt_buckets"] = list(out["mixed_wide_prompt_buckets"])
        if "prompt_lanes" in out:
            out["prompt_lanes"] = {str(b): n for b, n in out["prompt_lanes"]}
        return out


OPTION_TYPES: dict[str, type] = {
    "mixed_prefill": bool,
    "concurrency": int,
    "speculative_token_capacity": int,
    "num_draft_tokens": int,
    "max_prefill_chunk": int,
    "speculation": str,
    "mixed_wide_prompt_buckets": list,
    "indexer_kv_dtype": str,
    "prompt_lanes": dict,
}


def check_indexer_kv_dtype(where: str, value: str | None) -> None:
    """A QSA index-key storage name (None: unset); the error names ``where`` and the value."""
    if value is not None and value not in INDEXER_KV_DTYPES:
        raise ValueError(f"{where} = {value!r}: expected one of {', '.join(INDEXER_KV_DTYPES)}")


def parse_load_options(raw: Mapping[str, Any], where: str) -> LoadOptions:
    """Build LoadOptions from a mapping, naming the first bad key or value.

    Raises ValueError with ``where`` and the key; callers wrap it in their own
    error type so that the message names the file it came from.
    """
    if not isinstance(raw, Mapping):
        raise ValueError(f"'{where}' = {raw!r}: expected a mapping of option names to values")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in OPTION_TYPES:
            raise ValueError(
                f"'{where}.{key}' = {value!r}: unknown option (known: {', '.join(OPTION_TYPES)})"
            )
        expected = OPTION_TYPES[key]
        if expected is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValueError(f"'{where}.{key}' = {value!r}: expected an integer")
        if expected is not int and not isinstance(value, expected):
            raise ValueError(f"'{where}.{key}' = {value!r}: expected {expected.__name__}")
        if key == "speculation" and value not in SPECULATION_MODES:
            raise ValueError(f"'{where}.{key}' = {value!r}: expected one of {SPECULATION_MODES}")
        if key == "indexer_kv_dtype":
            check_indexer_kv_dtype(f"'{where}.{key}'", value)
        if key == "prompt_lanes":
            value = _lane_pairs(value, f"'{where}.{key}'")
        if expected is list:
            if any(isinstance(v, bool) or not isinstance(v, int) for v in value):
                raise ValueError(f"'{where}.{key}' = {value!r}: expected a list of integers")
            value = tuple(value)
        values[key] = value
    return LoadOptions(**values)


def _lane_pairs(value: Mapping[Any, Any], where: str) -> tuple[tuple[int, int], ...]:
    """{bucket: L} (keys may be strings, as JSON writes them) -> sorted (bucket, L) pairs."""
    pairs = []
    for bucket, lanes in value.items():
        try:
            pair = (int(bucket), lanes)
        except (TypeError, ValueError):
            raise ValueError(
                f"{where} = {dict(value)!r}: bucket {bucket!r} is not an integer"
            ) from None
        if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 1:
            raise ValueError(f"{where} = {dict(value)!r}: L = {lanes!r} must be an integer >= 1")
        pairs.append(pair)
    return tuple(sorted(pairs))
