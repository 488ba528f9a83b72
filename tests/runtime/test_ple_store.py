"""The PLE table's pieces, its three residencies and the default choice (docs/ple.md)."""

from __future__ import annotations

import json

import pytest
import torch

from ignition.runtime.ple.store import choose_residency, open_store
from ignition.runtime.ple.table import PleTableError, read_layout, shard_name, write_table

WIDTH = 6
SIZES = (7, 5, 9)  # rows per piece


@pytest.fixture
def table(tmp_path):
    g = torch.Generator().manual_seed(0)
    full = torch.randn(sum(SIZES), WIDTH, generator=g).to(torch.bfloat16)
    write_table(tmp_path, list(full.split(SIZES)))
    return tmp_path, full


def test_the_layout_concatenates_the_pieces_in_order(table):
    folder, full = table
    layout = read_layout(folder)
    assert [p.first_row for p in layout.pieces] == [0, 7, 12]
    assert layout.num_rows == len(full)
    assert layout.table_bytes == full.numel() * 2


@pytest.mark.parametrize("residency", ["device", "host", "disk"])
def test_every_residency_gathers_the_same_rows(table, residency):
    folder, full = table
    store = open_store(read_layout(folder), residency, torch.device("cpu"), cache_bytes=4 * 12)
    ids = torch.tensor([[0, 20], [7, 6], [12, 11], [20, 0]])
    out = torch.empty(*ids.shape, WIDTH, dtype=torch.bfloat16)
    store.gather(ids, out)
    assert torch.equal(out, full[ids])
    assert store.stats.snapshot().rows_gathered == ids.numel()


def test_host_preload_gathers_from_a_copy_in_memory(table):
    folder, full = table
    layout = read_layout(folder)
    store = open_store(layout, "host", torch.device("cpu"), preload=True)
    for piece in layout.pieces:  # the files change under the store: the copy does not
        with piece.path.open("r+b") as f:
            f.seek(piece.data_offset)
            f.write(bytes(piece.num_rows * layout.row_bytes))
    out = torch.empty(3, WIDTH, dtype=torch.bfloat16)
    store.gather(torch.tensor([3, 8, 19]), out)
    assert torch.equal(out, full[[3, 8, 19]])


def test_the_disk_store_counts_cache_hits_and_misses(table):
    folder, _ = table
    store = open_store(read_layout(folder), "disk", torch.device("cpu"), cache_bytes=1 << 20)
    out = torch.empty(3, WIDTH, dtype=torch.bfloat16)
    store.gather(torch.tensor([1, 2, 1]), out)
    store.gather(torch.tensor([2, 3, 1]), out)
    s = store.stats.snapshot()
    assert (s.cache_hits, s.cache_misses) == (2, 3)
    assert s.bytes_moved == 3 * WIDTH * 2  # only misses move bytes from the mapped file


def test_a_row_id_outside_the_table_is_refused(table):
    folder, _ = table
    store = open_store(read_layout(folder), "host", torch.device("cpu"))
    with pytest.raises(IndexError, match="21 rows"):
        store.gather(torch.tensor([21]), torch.empty(1, WIDTH, dtype=torch.bfloat16))


def test_a_missing_shard_fails_at_load_naming_it(table):
    folder, _ = table
    (folder / shard_name(1)).unlink()
    with pytest.raises(PleTableError, match=r"shard_1\.safetensors \(tensor 'table'\): missing"):
        read_layout(folder)


def test_a_truncated_shard_fails_at_load_naming_it(table):
    folder, _ = table
    path = folder / shard_name(2)
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(PleTableError, match=r"shard_2\.safetensors \(tensor 'table'\): truncated"):
        read_layout(folder)


def test_a_shard_without_the_tensor_fails_at_load_naming_both(table):
    folder, _ = table
    index = json.loads((folder / "table.json").read_text())
    (folder / "table.json").write_text(json.dumps({**index, "tensor": "weights"}))
    with pytest.raises(PleTableError, match=r"shard_0\.safetensors \(tensor 'weights'\)"):
        read_layout(folder)


def test_errors_are_one_line(table):
    folder, _ = table
    (folder / shard_name(0)).write_bytes(b"\x01")
    with pytest.raises(PleTableError) as err:
        read_layout(folder)
    assert "\n" not in str(err.value)


def test_the_default_residency_follows_the_sizes():
    gib = 1 << 30
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert choose_residency(10 * gib, cuda, device_free_bytes=80 * gib, host_bytes=1) == "device"
    assert choose_residency(48 * gib, cuda, device_free_bytes=80 * gib, host_bytes=256 * gib) == (
        "host"
    )
    assert choose_residency(48 * gib, cuda, device_free_bytes=80 * gib, host_bytes=64 * gib) == (
        "disk"
    )
    # on CPU device and host are one memory: the device, or disk when it does not fit
    assert choose_residency(10 * gib, cpu, host_bytes=64 * gib) == "device"
    assert choose_residency(48 * gib, cpu, host_bytes=64 * gib) == "disk"


def test_an_unknown_residency_is_one_line(table):
    folder, _ = table
    with pytest.raises(ValueError, match="ple residency = 'gpu': one of device, host, disk"):
        open_store(read_layout(folder), "gpu", torch.device("cpu"))
