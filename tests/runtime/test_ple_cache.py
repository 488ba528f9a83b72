"""The disk residency's row cache: exact rows, least recently used, a byte bound."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ignition.runtime.ple_cache import RowCache

WIDTH = 3
TABLE = torch.arange(40 * WIDTH, dtype=torch.float32).view(40, WIDTH)


def read(ids: torch.Tensor, dst: torch.Tensor) -> None:
    dst.copy_(TABLE[ids])


@settings(max_examples=60, deadline=None)
@given(
    cache_rows=st.integers(0, 5),
    frames=st.lists(st.lists(st.integers(0, 39), min_size=1, max_size=12), max_size=12),
)
def test_the_cache_never_returns_a_wrong_row_and_keeps_its_byte_bound(cache_rows, frames):
    row_bytes = WIDTH * 4
    cache = RowCache(cache_rows * row_bytes + row_bytes - 1, WIDTH, torch.float32)
    for frame in frames:
        unique = list(dict.fromkeys(frame))
        out = torch.full((len(unique), WIDTH), float("nan"))
        cache.gather(unique, out, read)
        assert torch.equal(out, TABLE[unique])
        assert cache.resident_bytes <= cache.capacity_bytes


def test_the_least_recently_used_row_is_evicted_first():
    cache = RowCache(2 * WIDTH * 4, WIDTH, torch.float32)
    out = torch.empty(1, WIDTH)
    for row in (1, 2, 1, 3):  # 2 is the least recently used when 3 arrives
        cache.gather([row], out, read)
    assert 1 in cache and 3 in cache and 2 not in cache


def test_hits_and_misses_are_counted():
    cache = RowCache(4 * WIDTH * 4, WIDTH, torch.float32)
    out = torch.empty(2, WIDTH)
    cache.gather([5, 6], out, read)
    cache.gather([6, 7], out, read)
    assert (cache.hits, cache.misses) == (1, 3)
