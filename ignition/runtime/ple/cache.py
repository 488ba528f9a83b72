"""An exact least-recently-used cache of table rows with a byte bound (disk residency)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import torch


class RowCache:
    def __init__(self, capacity_bytes: int, row_width: int, dtype: torch.dtype) -> None:
        if capacity_bytes < 0:
            raise ValueError(f"ple_cache_bytes = {capacity_bytes}: must be nonnegative")
        self.row_bytes = row_width * torch.empty((), dtype=dtype).element_size()
        self.capacity_bytes = capacity_bytes
        self.capacity_rows = capacity_bytes // self.row_bytes
        self._block = torch.empty(self.capacity_rows, row_width, dtype=dtype)
        self._slots: OrderedDict[int, int] = OrderedDict()
        self._free = list(range(self.capacity_rows - 1, -1, -1))
        self.hits = 0
        self.misses = 0

    @property
    def resident_bytes(self) -> int:
        return len(self._slots) * self.row_bytes

    def __contains__(self, row_id: int) -> bool:
        return row_id in self._slots

    def gather(
        self,
        unique_ids: list[int],
        out: torch.Tensor,
        read: Callable[[torch.Tensor, torch.Tensor], None],
    ) -> None:
        """Rows ``unique_ids`` into ``out``; misses read with ``read``, inserted after all hits."""
        hit_pos, hit_slots, miss_pos, miss_ids = [], [], [], []
        for i, row in enumerate(unique_ids):
            slot = self._slots.get(row)
            if slot is None:
                miss_pos.append(i)
                miss_ids.append(row)
            else:
                self._slots.move_to_end(row)
                hit_pos.append(i)
                hit_slots.append(slot)
        self.hits += len(hit_pos)
        self.misses += len(miss_pos)
        if not miss_pos:  # all hits, in order: one gather straight into ``out``
            torch.index_select(self._block, 0, torch.tensor(hit_slots), out=out)
            return
        if hit_pos:
            hits = self._block.index_select(0, torch.tensor(hit_slots))
            out.index_copy_(0, torch.tensor(hit_pos), hits)
        fetched = torch.empty(len(miss_ids), out.shape[1], dtype=out.dtype)
        read(torch.tensor(miss_ids, dtype=torch.int64), fetched)
        out.index_copy_(0, torch.tensor(miss_pos), fetched)
        keep = min(len(miss_ids), self.capacity_rows)  # only the most recent can stay
        if keep == 0:
            return
        slots = [self._claim(row) for row in miss_ids[len(miss_ids) - keep :]]
        # Distinct slots: at most capacity rows enter, each evicting an entry older than all
        # of them, so one indexed copy stores them.
        self._block[torch.tensor(slots)] = fetched[len(miss_ids) - keep :]

    def _claim(self, row: int) -> int:
        """A slot for ``row``: a free one, else the least recently used entry's."""
        if self._free:
            slot = self._free.pop()
        else:
            _, slot = self._slots.popitem(last=False)
        self._slots[row] = slot
        return slot
