"""KV pages and state rows of the request slots."""

from __future__ import annotations

from ignition.compiler.staging import HostMirror
from ignition.model.state import ModelState


class ResourceError(RuntimeError):
    """Out of pages or context: a request asked for more than the runtime holds."""


class SlotResources:
    """Pages and length bounds per slot; ``page_table``: the host mirror frames upload."""

    def __init__(
        self, state: ModelState, num_pages: int, page_table: HostMirror | None = None
    ) -> None:
        self.state = state
        self.page_table = page_table
        self.page_size = state.page_size
        self._free = list(range(num_pages - 1, -1, -1))  # pop() hands out low ids first
        self._pages: dict[int, list[int]] = {}
        self._upper_len: dict[int, int] = {}

    @property
    def num_free_pages(self) -> int:
        return len(self._free)

    def pages_of(self, slot: int) -> list[int]:
        return list(self._pages.get(slot, ()))

    def begin(self, slot: int, reset_state: bool = True) -> None:
        """A new request takes ``slot``: no pages, length zero, fresh state."""
        self.release(slot)
        if reset_state:
            self.state.reset_slot(slot)
        self._upper_len[slot] = 0

    def reserve(self, slot: int, length: int, lookahead: int) -> None:
        """The slot's committed length is now at most ``length``; cover ``lookahead`` more."""
        self._cover(slot, length + lookahead)
        self._upper_len[slot] = length

    def advance(self, slot: int, max_advance: int, lookahead: int) -> None:
        """A decode frame may commit up to ``max_advance`` tokens and write ``lookahead``."""
        length = self._upper_len.get(slot, 0) + max_advance
        self._cover(slot, length + lookahead)
        self._upper_len[slot] = length

    def settle(self, slot: int, planned: int, committed: int) -> None:
        """A read frame committed ``committed`` of ``planned`` tokens; the rest leaves the bound."""
        if slot in self._upper_len:
            self._upper_len[slot] -= max(0, planned - committed)

    def length_bound(self, slot: int) -> int:
        """The slot's committed length after every launched frame, at most."""
        return self._upper_len.get(slot, 0)

    def release(self, slot: int) -> None:
        self._free.extend(reversed(self._pages.pop(slot, [])))
        self._upper_len.pop(slot, None)

    def _cover(self, slot: int, num_tokens: int) -> None:
        pages = self._pages.setdefault(slot, [])
        needed = -(-num_tokens // self.page_size)
        if needed > self.state.max_pages_per_slot:
            raise ResourceError(
                f"slot {slot}: {num_tokens} tokens exceed the per-slot capacity "
                f"{self.state.capacity_tokens}"
            )
        if needed - len(pages) > len(self._free):
            raise ResourceError(
                f"slot {slot}: needs {needed - len(pages)} more KV pages, {len(self._free)} free"
            )
        if needed > len(pages):
            pages.extend(self._free.pop() for _ in range(needed - len(pages)))
            if self.page_table is None:
                self.state.assign_pages(slot, pages)
                return
            self.page_table.array[slot, : len(pages)] = pages
            self.page_table.array[slot, len(pages) :] = -1
            self.page_table.mark_dirty()
