"""The disk residency's row cache: exact rows, least recently used, a byte bound."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ignition.runtime.ple.cache import RowCache
from ignition.runtime.ple.store import open_store
from ignition.runtime.ple.table import read_layout, write_table

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


@pytest.fixture(scope="module")
def disk_table(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ple")
    full = torch.randn(37, WIDTH).to(torch.bfloat16)
    write_table(folder, list(full.split((10, 1, 26))))
    return read_layout(folder), full


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    cache_rows=st.integers(0, 4),
    frames=st.lists(
        st.lists(st.integers(0, 36), min_size=1, max_size=10).map(lambda f: torch.tensor(f)),
        max_size=10,
    ),
)
def test_the_disk_store_returns_exact_rows_across_shards_with_a_tiny_cache(
    disk_table, cache_rows, frames
):
    layout, full = disk_table
    store = open_store(layout, "disk", torch.device("cpu"), cache_bytes=cache_rows * WIDTH * 2)
    for ids in frames:
        out = torch.empty(len(ids), WIDTH, dtype=torch.bfloat16)
        store.gather(ids, out)
        assert torch.equal(out, full[ids])
        assert store.cache.resident_bytes <= store.cache.capacity_bytes
