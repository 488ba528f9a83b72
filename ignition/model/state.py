"""Per-request state of Qwen3.8 Flash, one row per request slot.

QSA and MTP keys/values live in paged caches shared by all slots (one page table row per
slot); GDN recurrent states and convolution windows are not paged: each slot owns one row.
Every per-slot tensor has one extra row, the scratch row at index ``num_slots``: padding and
inactive rows read and write it, so that a static-capacity program needs no branch to leave
the real slots untouched.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import Tensor

from ignition.model.config import Qwen38Config


@dataclass(frozen=True)
class SlotSnapshot:
    """A copy of one slot's complete state; KV pages are copied by content."""

    seq_len: Tensor  # [] int32
    page_row: Tensor  # [max_pages] int32
    gdn_state: Tensor  # [gdn_layers, H, Dk, Dv] fp32
    conv_window: Tensor  # [gdn_layers, C, K-1]
    mtp_hidden: Tensor  # [hidden]
    k_pages: Tensor  # [qsa_layers, used_pages, page_size, Hkv, Dh]
    v_pages: Tensor
    mtp_k_pages: Tensor  # [mtp_layers, used_pages, page_size, Hkv, Dh]
    mtp_v_pages: Tensor


@dataclass
class ModelState:
    """The caches of every request slot; the runtime assigns pages, the model fills them."""

    num_slots: int
    page_size: int
    seq_lens: Tensor  # [slots + 1] int32 committed target positions per slot
    page_table: Tensor  # [slots + 1, max_pages] int32, -1 = unassigned
    k_cache: Tensor  # [qsa_layers, num_pages, page_size, Hkv, Dh]
    v_cache: Tensor
    mtp_k_cache: Tensor  # [mtp_layers, num_pages, page_size, Hkv, Dh]
    mtp_v_cache: Tensor
    gdn_state: Tensor  # [gdn_layers, slots + 1, H, Dk, Dv] fp32
    conv_window: Tensor  # [gdn_layers, slots + 1, C, K - 1]
    mtp_hidden: Tensor  # [slots + 1, hidden] MTP output at the last absorbed position

    @classmethod
    def allocate(
        cls,
        config: Qwen38Config,
        num_slots: int,
        num_pages: int,
        page_size: int,
        max_pages_per_slot: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> ModelState:
        if num_slots <= 0 or num_pages <= 0 or page_size <= 0 or max_pages_per_slot <= 0:
            raise ValueError(
                f"state capacities must be positive: slots={num_slots}, pages={num_pages}, "
                f"page_size={page_size}, max_pages_per_slot={max_pages_per_slot}"
            )
        rows = num_slots + 1
        kv_shape = (num_pages, page_size, config.num_key_value_heads, config.head_dim)
        heads = config.linear_num_heads
        return cls(
            num_slots=num_slots,
            page_size=page_size,
            seq_lens=torch.zeros(rows, dtype=torch.int32, device=device),
            page_table=torch.full((rows, max_pages_per_slot), -1, dtype=torch.int32, device=device),
            k_cache=torch.zeros(config.num_qsa_layers, *kv_shape, dtype=dtype, device=device),
            v_cache=torch.zeros(config.num_qsa_layers, *kv_shape, dtype=dtype, device=device),
            mtp_k_cache=torch.zeros(config.mtp_num_layers, *kv_shape, dtype=dtype, device=device),
            mtp_v_cache=torch.zeros(config.mtp_num_layers, *kv_shape, dtype=dtype, device=device),
            gdn_state=torch.zeros(
                config.num_gdn_layers,
                rows,
                heads,
                config.linear_key_head_dim,
                config.linear_value_head_dim,
                dtype=torch.float32,
                device=device,
            ),
            conv_window=torch.zeros(
                config.num_gdn_layers,
                rows,
                config.conv_channels,
                config.conv_kernel - 1,
                dtype=dtype,
                device=device,
            ),
            mtp_hidden=torch.zeros(rows, config.hidden_size, dtype=dtype, device=device),
        )

    @property
    def scratch_row(self) -> int:
        return self.num_slots

    @property
    def max_pages_per_slot(self) -> int:
        return self.page_table.shape[1]

    @property
    def capacity_tokens(self) -> int:
        return self.max_pages_per_slot * self.page_size

    def assign_pages(self, slot: int, pages: list[int]) -> None:
        """Give ``slot`` the pages it reads and writes, in position order."""
        self._check_slot(slot)
        if len(pages) > self.max_pages_per_slot:
            raise ValueError(
                f"slot {slot}: {len(pages)} pages exceed max_pages_per_slot "
                f"{self.max_pages_per_slot}"
            )
        num_pages = self.k_cache.shape[1] if self.k_cache.numel() else self.mtp_k_cache.shape[1]
        bad = [p for p in pages if not 0 <= p < num_pages]
        if bad:
            raise ValueError(f"slot {slot}: page ids {bad} outside [0, {num_pages})")
        row = torch.full((self.max_pages_per_slot,), -1, dtype=torch.int32)
        row[: len(pages)] = torch.tensor(pages, dtype=torch.int32)
        self.page_table[slot] = row.to(self.page_table.device)

    def reset_slot(self, slot: int) -> None:
        """Start a new request in ``slot``: length 0 and zero recurrent state (pages kept)."""
        self._check_slot(slot)
        self.seq_lens[slot] = 0
        self.gdn_state[:, slot] = 0
        self.conv_window[:, slot] = 0
        self.mtp_hidden[slot] = 0

    def snapshot(self, slot: int) -> SlotSnapshot:
        self._check_slot(slot)
        pages = self._used_pages(slot)
        return SlotSnapshot(
            seq_len=self.seq_lens[slot].clone(),
            page_row=self.page_table[slot].clone(),
            gdn_state=self.gdn_state[:, slot].clone(),
            conv_window=self.conv_window[:, slot].clone(),
            mtp_hidden=self.mtp_hidden[slot].clone(),
            k_pages=self.k_cache[:, pages].clone(),
            v_pages=self.v_cache[:, pages].clone(),
            mtp_k_pages=self.mtp_k_cache[:, pages].clone(),
            mtp_v_pages=self.mtp_v_cache[:, pages].clone(),
        )

    def restore(self, slot: int, snapshot: SlotSnapshot) -> None:
        """Write ``snapshot`` back into ``slot``, pages included (into the snapshot's pages)."""
        self._check_slot(slot)
        if snapshot.gdn_state.shape != self.gdn_state[:, slot].shape:
            raise ValueError("snapshot was taken from a state of a different shape")
        self.seq_lens[slot] = snapshot.seq_len
        self.page_table[slot] = snapshot.page_row
        self.gdn_state[:, slot] = snapshot.gdn_state
        self.conv_window[:, slot] = snapshot.conv_window
        self.mtp_hidden[slot] = snapshot.mtp_hidden
        pages = self._used_pages(slot)
        self.k_cache[:, pages] = snapshot.k_pages
        self.v_cache[:, pages] = snapshot.v_pages
        self.mtp_k_cache[:, pages] = snapshot.mtp_k_pages
        self.mtp_v_cache[:, pages] = snapshot.mtp_v_pages

    def copy_slot(self, source: int, target: int) -> None:
        """Fork ``source`` into ``target``: same length and state, KV copied into target's pages."""
        self._check_slot(source)
        self._check_slot(target)
        pages = self._used_pages(source)
        target_pages = self.page_table[target, : pages.numel()].long()
        if bool((target_pages < 0).any()):
            raise ValueError(f"slot {target} lacks the {pages.numel()} pages slot {source} uses")
        self.seq_lens[target] = self.seq_lens[source]
        self.gdn_state[:, target] = self.gdn_state[:, source]
        self.conv_window[:, target] = self.conv_window[:, source]
        self.mtp_hidden[target] = self.mtp_hidden[source]
        for cache in (self.k_cache, self.v_cache, self.mtp_k_cache, self.mtp_v_cache):
            cache[:, target_pages] = cache[:, pages]

    def clone(self) -> ModelState:
        """A deep copy (tests compare two executions that start from the same state)."""
        copied = {
            f.name: getattr(self, f.name).clone()
            if isinstance(getattr(self, f.name), Tensor)
            else getattr(self, f.name)
            for f in fields(self)
        }
        return ModelState(**copied)

    def _used_pages(self, slot: int) -> Tensor:
        num_used = -(-int(self.seq_lens[slot]) // self.page_size)
        return self.page_table[slot, :num_used].long()

    def _check_slot(self, slot: int) -> None:
        if not 0 <= slot < self.num_slots:
            raise ValueError(f"slot {slot} outside [0, {self.num_slots})")


def contiguous_pages(state: ModelState) -> None:
    """Give slot s the pages [s * max_pages, (s + 1) * max_pages): a test and bench allocator."""
    per_slot = state.max_pages_per_slot
    for slot in range(state.num_slots):
        state.assign_pages(slot, list(range(slot * per_slot, (slot + 1) * per_slot)))
