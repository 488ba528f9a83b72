"""The PLE n-gram hash of Qwen3.8-Flash-Next: token ids -> rows of a PLE layer's table.
Pure functions of token ids, so the runtime can name a frame's rows first (docs/model.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import torch
from torch import Tensor

_MASK64 = (1 << 64) - 1
_GOLDEN_GAMMA = 0x9E3779B97F4A7C15
_MIX_1 = 0xBF58476D1CE4E5B9
_MIX_2 = 0x94D049BB133111EB
_LAYER_STRIDE = 10007


@dataclass(frozen=True)
class NgramHash:
    """One PLE layer's hash constants."""

    multipliers: tuple[int, ...]  # [ngram_size], one per n-gram member
    head_sizes: tuple[int, ...]  # [num_heads] prime table size per head
    head_offsets: tuple[int, ...]  # [num_heads] first row of each head in the layer's table
    num_rows: int  # the table's rows (heads concatenated, rounded up to the divisor)
    heads_per_ngram: int
    eos_token_id: int

    @property
    def ngram_size(self) -> int:
        return len(self.multipliers)

    @property
    def num_heads(self) -> int:
        return len(self.head_sizes)


def _splitmix64(value: int) -> int:
    value = (value + _GOLDEN_GAMMA) & _MASK64
    value = ((value ^ (value >> 30)) * _MIX_1) & _MASK64
    value = ((value ^ (value >> 27)) * _MIX_2) & _MASK64
    return value ^ (value >> 31)


def layer_multipliers(vocab_size: int, ngram_size: int, ple_index: int, seed: int) -> list[int]:
    """Odd multipliers below (2^63 - 1) / vocab_size, one per n-gram member."""
    half_bound = max(1, ((1 << 63) - 1) // max(vocab_size, 1) // 2)
    base = seed + _LAYER_STRIDE * ple_index
    return [
        2 * (_splitmix64((base + _GOLDEN_GAMMA * (member + 1)) & _MASK64) % half_bound) + 1
        for member in range(ngram_size)
    ]


def _is_prime(value: int) -> bool:
    if value < 2 or (value % 2 == 0 and value != 2):
        return value == 2
    return all(value % d for d in range(3, math.isqrt(value) + 1, 2))


@lru_cache(maxsize=64)
def primes_from(base: int, count: int) -> tuple[int, ...]:
    """The first ``count`` primes >= ``base``."""
    found, candidate = [], base
    while len(found) < count:
        if _is_prime(candidate):
            found.append(candidate)
        candidate += 1
    return tuple(found)


def build_hash(
    vocab_size: int,
    ngram_size: int,
    heads_per_ngram: int,
    vocab_size_base: int,
    vocab_size_divisor: int,
    seed: int,
    ple_index: int,
    eos_token_id: int,
) -> NgramHash:
    """The constants of PLE layer number ``ple_index`` (its position in the PLE layer list)."""
    num_heads = (ngram_size - 1) * heads_per_ngram
    primes = primes_from(vocab_size_base, num_heads * (ple_index + 1))
    sizes = primes[num_heads * ple_index :]
    offsets = [0]
    for size in sizes[:-1]:
        offsets.append(offsets[-1] + size)
    total = offsets[-1] + sizes[-1]
    rows = -(-total // vocab_size_divisor) * vocab_size_divisor
    return NgramHash(
        multipliers=tuple(layer_multipliers(vocab_size, ngram_size, ple_index, seed)),
        head_sizes=tuple(sizes),
        head_offsets=tuple(offsets),
        num_rows=rows,
        heads_per_ngram=heads_per_ngram,
        eos_token_id=eos_token_id,
    )


def hash_constants(spec: NgramHash, device: torch.device | str = "cpu") -> tuple[Tensor, ...]:
    """(multipliers [n], head sizes, head offsets) int64 on ``device``, built once."""
    return tuple(
        torch.tensor(values, dtype=torch.long, device=device)
        for values in (spec.multipliers, spec.head_sizes, spec.head_offsets)
    )


def ngram_row_ids_from_members(
    members: Tensor, spec: NgramHash, constants: tuple[Tensor, ...] | None = None
) -> Tensor:
    """[T, num_heads] int64 rows of the layer's table for each token's n-gram members."""
    if constants is None:
        constants = hash_constants(spec, members.device)
    multipliers, sizes, offsets = (c.to(members.device) for c in constants)
    products = members.long() * multipliers  # [T, n], wrapping int64 as the reference does
    per_order = []
    mixed = products[:, 0]
    for order in range(2, spec.ngram_size + 1):
        mixed = torch.bitwise_xor(mixed, products[:, order - 1])
        per_order.append(mixed[:, None].expand(-1, spec.heads_per_ngram))
    hashed = torch.cat(per_order, dim=1)  # [T, num_heads]
    return torch.remainder(hashed, sizes) + offsets


def ngram_row_ids(
    token_ids: Tensor,
    context: Tensor,
    token_row: Tensor,
    token_offset: Tensor,
    spec: NgramHash,
    constants: tuple[Tensor, ...] | None = None,
) -> Tensor:
    """[T, num_heads] int64 rows of the layer's own table for every packed token."""
    members = ngram_members(token_ids, context, token_row, token_offset, spec.eos_token_id)
    return ngram_row_ids_from_members(members, spec, constants)


def ngram_members(
    token_ids: Tensor, context: Tensor, token_row: Tensor, token_offset: Tensor, eos: int
) -> Tensor:
    """[T, ngram_size] each packed token's n-gram members; ``context`` [R, ngram_size - 1]
    is each row's previous ids, oldest first (EOS for a new request)."""
    context_len = context.shape[1]
    num_tokens = token_ids.shape[0]
    index = torch.arange(num_tokens, device=token_ids.device)
    members = [token_ids.long()]
    for shift in range(1, context_len + 1):
        from_frame = token_ids.long()[(index - shift).clamp(min=0)]
        back = (context_len + token_offset - shift).clamp(min=0, max=context_len - 1)
        from_context = context.long()[token_row, back]
        members.append(torch.where(token_offset >= shift, from_frame, from_context))
    window = torch.stack(members, dim=1)  # [T, n]: member s = token i - s
    cut = torch.cumsum((window[:, 1:] == eos).long(), dim=1) > 0  # EOS at members 1..s
    return torch.cat([window[:, :1], torch.where(cut, eos, window[:, 1:])], dim=1)


def next_context(
    token_ids: Tensor, context: Tensor, token_row: Tensor, token_offset: Tensor
) -> Tensor:
    """[T, ngram_size - 1] the context a row carries after each packed token."""
    context_len = context.shape[1]
    num_tokens = token_ids.shape[0]
    index = torch.arange(num_tokens, device=token_ids.device)
    columns = []
    for back in range(context_len - 1, -1, -1):  # oldest first: token i - back
        from_frame = token_ids.long()[(index - back).clamp(min=0)]
        from_context = context.long()[
            token_row, (context_len + token_offset - back).clamp(min=0, max=context_len - 1)
        ]
        columns.append(torch.where(token_offset >= back, from_frame, from_context))
    return torch.stack(columns, dim=1)


def row_id_function(spec: NgramHash):
    """Row ids for one request (``runtime.ple.delivery.RowIdFunction``): (tokens [T], context
    [ngram_size - 1]) -> [T, heads]; a first frame passes EOS as context."""

    def row_ids(tokens: Tensor, context: Tensor) -> Tensor:
        rows = torch.zeros(tokens.shape[0], dtype=torch.long, device=tokens.device)
        offsets = torch.arange(tokens.shape[0], device=tokens.device)
        return ngram_row_ids(tokens.long(), context.long()[None], rows, offsets, spec)

    return row_ids
