"""The default snapshot-row count: four per request slot (the multi-turn simulation's
measurement, README "Prefix caching"), capped on a GPU by the memory rows take."""

from __future__ import annotations

import torch

from ignition.compiler.state_ops import SnapshotStore
from ignition.model.config import ModelConfig
from ignition.model.state import ModelState
from ignition.runtime.assembly import RuntimeOptions, resolve_snapshot_rows


def _state() -> ModelState:
    cpu = torch.device("cpu")
    return ModelState.allocate(ModelConfig.tiny(), 4, 33, 16, 8, device=cpu, dtype=torch.float32)


def test_row_bytes_are_what_a_snapshot_row_allocates():
    state = _state()
    store = SnapshotStore.allocate(state, 3)
    tensors = (store.seq_lens, *store.rows.values(), *store.caches.values())
    total = sum(t.numel() * t.element_size() for t in tensors)
    assert SnapshotStore.row_bytes(state) * 3 == total


def test_the_default_is_four_rows_per_slot_and_an_explicit_count_is_kept():
    state = _state()
    cpu = torch.device("cpu")
    assert resolve_snapshot_rows(RuntimeOptions(num_slots=4, snapshot_rows=None), state, cpu) == 16
    assert resolve_snapshot_rows(RuntimeOptions(num_slots=4, snapshot_rows=0), state, cpu) == 0


def test_on_a_gpu_the_default_takes_at_most_half_the_free_memory(monkeypatch):
    state = _state()
    row = SnapshotStore.row_bytes(state)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (10 * row, 100 * row))
    cuda = torch.device("cuda")
    assert resolve_snapshot_rows(RuntimeOptions(num_slots=4, snapshot_rows=None), state, cuda) == 5
    explicit = RuntimeOptions(num_slots=4, snapshot_rows=12)
    assert resolve_snapshot_rows(explicit, state, cuda) == 12  # asked for: not second-guessed
