"""State operations: snapshot a slot's complete state, restore it into a slot, and
initialize a fresh slot (a restore from the zero state).

Static-shape programs with no host sync: the slot and the snapshot row are device inputs.
Restore writes into pages the runtime assigned first; unassigned entries (-1) go to the
scratch page. Initialization copies no pages. Details: docs/compiler.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ignition.compiler.graph import PreparedProgram, timed_run
from ignition.components.descriptor import Descriptor
from ignition.components.state_programs import INIT, RESTORE, SNAPSHOT
from ignition.model.state import PAGED_FIELDS, SLOT_FIELDS, ModelState


@dataclass
class StateOpInputs:
    slot: Tensor  # [1] int32 request slot
    row: Tensor  # [1] int32 snapshot row


@dataclass
class SnapshotStore:
    """Preallocated snapshot rows, each with room for a slot's every page."""

    seq_lens: Tensor  # [rows] int32
    rows: dict[str, Tensor]  # SLOT_FIELDS name -> the field with ``rows`` in its slot dim
    caches: dict[str, Tensor]  # PAGED_FIELDS name -> [layers, rows * max_pages, ...]

    @classmethod
    def allocate(cls, state: ModelState, num_rows: int) -> SnapshotStore:
        if num_rows < 1:
            raise ValueError(f"a snapshot store needs at least one row, got {num_rows}")
        per_row = state.max_pages_per_slot

        def rows_like(t: Tensor, dim: int) -> Tensor:
            shape = (*t.shape[:dim], num_rows, *t.shape[dim + 1 :])
            return torch.zeros(shape, dtype=t.dtype, device=t.device)

        def pages_like(cache: Tensor) -> Tensor:
            shape = (cache.shape[0], num_rows * per_row, *cache.shape[2:])
            return torch.zeros(shape, dtype=cache.dtype, device=cache.device)

        return cls(
            seq_lens=torch.zeros(num_rows, dtype=torch.int32, device=state.seq_lens.device),
            rows={name: rows_like(getattr(state, name), dim) for name, dim in SLOT_FIELDS},
            caches={name: pages_like(getattr(state, name)) for name in PAGED_FIELDS},
        )

    @property
    def num_rows(self) -> int:
        return int(self.seq_lens.shape[0])

    @staticmethod
    def row_bytes(state: ModelState) -> int:
        """Device memory one snapshot row takes: a slot's state and every page it can own."""
        per_slot = 4
        for name, dim in SLOT_FIELDS:
            t = getattr(state, name)
            per_slot += t.select(dim, 0).numel() * t.element_size()
        for name in PAGED_FIELDS:
            cache = getattr(state, name)
            per_slot += cache[:, :1].numel() * cache.element_size() * state.max_pages_per_slot
        return per_slot


def _bytes(cache: Tensor) -> Tensor:
    """An FP8 cache as bytes (CPU torch has no float8 ``index_copy_``)."""
    is_fp8 = cache.dtype.is_floating_point and cache.dtype.itemsize == 1
    return cache.view(torch.uint8) if is_fp8 else cache


def _store_pages(state: ModelState, row: Tensor) -> Tensor:
    per_row = state.max_pages_per_slot
    return row.long() * per_row + torch.arange(per_row, device=row.device)


def snapshot_program(state: ModelState, store: SnapshotStore):
    """fn(inputs): copy slot ``inputs.slot`` into snapshot row ``inputs.row``."""

    def run_snapshot(x: StateOpInputs) -> Tensor:
        slot, row = x.slot.long(), x.row.long()
        store.seq_lens.index_copy_(0, row, state.seq_lens[slot])
        for name, dim in SLOT_FIELDS:
            store.rows[name].index_copy_(dim, row, getattr(state, name).index_select(dim, slot))
        pages = state.page_table[slot][0].long()  # [max_pages], -1 unassigned; [slot] gathers
        source = torch.where(pages >= 0, pages, state_scratch_page(state))
        target = _store_pages(state, row)
        for name in PAGED_FIELDS:
            _bytes(store.caches[name]).index_copy_(
                1, target, _bytes(getattr(state, name))[:, source]
            )
        return store.seq_lens[row]

    return run_snapshot


def restore_program(state: ModelState, store: SnapshotStore):
    """fn(inputs): write snapshot row ``inputs.row`` into slot ``inputs.slot``'s pages."""

    def run_restore(x: StateOpInputs) -> Tensor:
        slot, row = x.slot.long(), x.row.long()
        state.seq_lens.index_copy_(0, slot, store.seq_lens[row])
        for name, dim in SLOT_FIELDS:
            getattr(state, name).index_copy_(dim, slot, store.rows[name].index_select(dim, row))
        pages = state.page_table[slot][0].long()
        target = torch.where(pages >= 0, pages, state_scratch_page(state))
        source = _store_pages(state, row)
        for name in PAGED_FIELDS:
            _bytes(getattr(state, name)).index_copy_(
                1, target, _bytes(store.caches[name])[:, source]
            )
        return state.seq_lens[slot]

    return run_restore


def init_program(state: ModelState):
    """fn(inputs): start slot ``inputs.slot`` from the zero state (``inputs.row`` unused)."""

    def run_init(x: StateOpInputs) -> Tensor:
        slot = x.slot.long()
        state.seq_lens.index_fill_(0, slot, 0)
        for name, dim in SLOT_FIELDS:
            fill = state.ngram_eos if name == "ngram_context" else 0
            getattr(state, name).index_fill_(dim, slot, fill)
        return state.seq_lens[slot]

    return run_init


def state_scratch_page(state: ModelState) -> int:
    """The last KV page: reserved by the runtime, never handed to a request."""
    return state.num_pages - 1


def state_op_inputs(device: torch.device) -> StateOpInputs:
    return StateOpInputs(
        slot=torch.zeros(1, dtype=torch.int32, device=device),
        row=torch.zeros(1, dtype=torch.int32, device=device),
    )


class StateOperations:
    """The prepared snapshot, restore and init programs over one state and one store."""

    def __init__(self, state: ModelState, num_rows: int, capturer) -> None:
        device = state.seq_lens.device
        self.state = state
        self.store = SnapshotStore.allocate(state, num_rows)
        self._snapshot_inputs = state_op_inputs(device)
        self._restore_inputs = state_op_inputs(device)
        self.snapshot_program = capturer.prepare(
            SNAPSHOT.name, snapshot_program(state, self.store), self._snapshot_inputs
        )
        self.restore_program = capturer.prepare(
            RESTORE.name, restore_program(state, self.store), self._restore_inputs
        )
        self._init_inputs = state_op_inputs(device)
        self.init_program = capturer.prepare(INIT.name, init_program(state), self._init_inputs)

    @property
    def programs(self) -> dict[Descriptor, PreparedProgram]:
        """Each prepared program under its descriptor (components/state_programs.py)."""
        return {
            SNAPSHOT: self.snapshot_program,
            RESTORE: self.restore_program,
            INIT: self.init_program,
        }

    def snapshot(self, slot: int, row: int) -> int:
        """Copy ``slot`` into snapshot ``row``; returns the measured interval in ns."""
        self._check(slot, row)
        self._snapshot_inputs.slot.fill_(slot)
        self._snapshot_inputs.row.fill_(row)
        return timed_run(self.snapshot_program)[1]

    def restore(self, slot: int, row: int) -> int:
        """Write ``row`` into ``slot``, whose pages the caller has assigned; returns ns."""
        self._check(slot, row)
        self._restore_inputs.slot.fill_(slot)
        self._restore_inputs.row.fill_(row)
        return timed_run(self.restore_program)[1]

    def initialize(self, slot: int) -> int:
        """Start ``slot`` from the zero state; returns the measured interval in ns."""
        self._check(slot, 0)
        self._init_inputs.slot.fill_(slot)
        return timed_run(self.init_program)[1]

    def _check(self, slot: int, row: int) -> None:
        if not 0 <= slot < self.state.num_slots:
            raise ValueError(f"slot {slot} outside [0, {self.state.num_slots})")
        if not 0 <= row < self.store.num_rows:
            raise ValueError(f"snapshot row {row} outside [0, {self.store.num_rows})")
