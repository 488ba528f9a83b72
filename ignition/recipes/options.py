"""Load-time options: what a user may change about a recipe's capacities.

Options only *reduce* what a recipe declares; ``None`` means "the recipe's value". The recipe
schema validates its ``expected_catalogs`` options with the same table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

SPECULATION_MODES = ("off", "fixed", "adaptive")
# QSA index-key storage (vLLM's ``indexer_kv_dtype``): "auto" keeps the model's dtype, "fp8"
# halves the cache (torch dtypes: ``ignition.model.state.INDEX_KEY_DTYPES``).
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
    # buckets preparing every wider mixed width (None: the recipe's; (): the seed's only)
    mixed_wide_prompt_buckets: tuple[int, ...] | None = None
    # QSA index-key storage (None: "auto", the model's dtype); one of INDEXER_KV_DTYPES
    indexer_kv_dtype: str | None = None
    # (prompt bucket, L) lanes to prepare (None: the recipe's; (): one lane everywhere)
    prompt_lanes: tuple[tuple[int, int], ...] | None = None
    # decode and speculative batch grid (None: the recipe's; 0: powers of two; 8: vLLM's)
    batch_bucket_step: int | None = None

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
    "batch_bucket_step": int,
}


BUCKET_STEP_RULE = "expected 0 (powers of two) or a power of two >= 2"


def is_bucket_step(step: int) -> bool:
    """A batch grid step (``batch_bucket_step``): 0 (powers of two) or a power of two >= 2."""
    return step == 0 or (step >= 2 and step & (step - 1) == 0)


def check_indexer_kv_dtype(where: str, value: str | None) -> None:
    """A QSA index-key storage name (None: unset); the error names ``where`` and the value."""
    if value is not None and value not in INDEXER_KV_DTYPES:
        raise ValueError(f"{where} = {value!r}: expected one of {', '.join(INDEXER_KV_DTYPES)}")


def parse_load_options(raw: Mapping[str, Any], where: str) -> LoadOptions:
    """Build LoadOptions from a mapping; ValueError names ``where`` and the first bad key."""
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
        if key == "batch_bucket_step" and not is_bucket_step(value):
            raise ValueError(
                f"'{where}.{key}' = {value!r}: {BUCKET_STEP_RULE}"
            )
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
