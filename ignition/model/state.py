"""Per-request state of the hybrid model, one row per request slot.

Attention KV is paged; the rest is one row per slot, plus a scratch row at index
``num_slots`` that padding and inactive rows read and write. :data:`SLOT_FIELDS` and
:data:`PAGED_FIELDS` list the state kinds every state operation iterates.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import Tensor

from ignition.model.config import ModelConfig

# QSA index-key storage by name (``ignition.recipes.INDEXER_KV_DTYPES``); None: state dtype.
INDEX_KEY_DTYPES: dict[str, torch.dtype | None] = {
    "auto": None,
    "bf16": torch.bfloat16,
    "fp8": torch.float8_e4m3fn,
}


def index_key_dtype(name: str) -> torch.dtype | None:
    """The torch dtype of an index-key storage name (None: the state's own dtype)."""
    if name not in INDEX_KEY_DTYPES:
        raise ValueError(
            f"indexer_kv_dtype = {name!r}: expected one of {', '.join(INDEX_KEY_DTYPES)}"
        )
    return INDEX_KEY_DTYPES[name]


# per-slot tensors and the dimension that indexes the slot
SLOT_FIELDS: tuple[tuple[str, int], ...] = (
    ("gdn_state", 1),
    ("conv_window", 1),
    ("mtp_hidden", 0),
    ("ple_window", 1),
    ("ngram_context", 0),
    ("index_raw", 1),
    ("index_rope", 0),
    ("mtp_index_raw", 1),
)
# paged caches, [layers, num_pages, ...]; a slot's pages are named by its page-table row
PAGED_FIELDS: tuple[str, ...] = (
    "k_cache",
    "v_cache",
    "mtp_k_cache",
    "mtp_v_cache",
    "index_keys",
    "mtp_index_keys",
)


@dataclass(frozen=True)
class SlotSnapshot:
    """A copy of one slot's complete state; pages are copied by content."""

    seq_len: Tensor  # [] int32
    page_row: Tensor  # [max_pages] int32
    rows: dict[str, Tensor]  # SLOT_FIELDS name -> the slot's row
    pages: dict[str, Tensor]  # PAGED_FIELDS name -> [layers, used_pages, ...]


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
    mtp_hidden: Tensor  # [slots + 1, S * hidden] MTP output at the last absorbed position
    ple_window: Tensor  # [ple_layers, slots + 1, S * hidden, (K - 1) * ngram_size]
    ngram_context: Tensor  # [slots + 1, ngram_size - 1] int64 last token ids, oldest first
    index_keys: Tensor  # [qsa_layers, num_pages, page_size / ratio, d] block keys
    index_raw: Tensor  # [qsa_layers, slots + 1, ratio, d] raw index keys by position % ratio
    index_rope: Tensor  # [slots + 1, ratio, 3] int64 rope positions by position % ratio
    mtp_index_keys: Tensor  # [mtp_layers, num_pages, page_size / ratio, d] (indexed MTP)
    mtp_index_raw: Tensor  # [mtp_layers, slots + 1, ratio, d] the MTP's committed ring
    # Round scratch, not state: draft positions' raw index keys and rope positions.
    mtp_draft_raw: Tensor  # [mtp_layers, slots + 1, ratio, d]
    mtp_draft_rope: Tensor  # [slots + 1, ratio, 3] int64
    ngram_eos: int = 0  # what a fresh n-gram context holds

    @classmethod
    def allocate(
        cls,
        config: ModelConfig,
        num_slots: int,
        num_pages: int,
        page_size: int,
        max_pages_per_slot: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
        index_key_dtype: torch.dtype | None = None,
    ) -> ModelState:
        """``index_key_dtype``: storage of QSA's block keys (None: ``dtype``)."""
        if num_slots <= 0 or num_pages <= 0 or page_size <= 0 or max_pages_per_slot <= 0:
            raise ValueError(
                f"state capacities must be positive: slots={num_slots}, pages={num_pages}, "
                f"page_size={page_size}, max_pages_per_slot={max_pages_per_slot}"
            )
        rows = num_slots + 1
        kv_shape = (num_pages, page_size, config.num_key_value_heads, config.head_dim)
        heads = config.linear_num_heads

        def zeros(*shape: int, kind: torch.dtype = dtype) -> Tensor:
            return torch.zeros(*shape, dtype=kind, device=device)

        ple, index = config.ngram_ple, config.qsa_indexer
        streams = max(config.hc_streams, 1) * config.hidden_size
        ratio = index.compress_ratio if index else 1
        if index is not None and page_size % ratio:
            raise ValueError(
                f"page_size {page_size} must be a multiple of the indexer's compress_ratio "
                f"{ratio} (block keys are paged beside the KV)"
            )
        eos = config.eos_token_id
        eos_id = (eos[0] if isinstance(eos, tuple) else eos) or 0
        context = ple.context_len if ple else 0
        index_dim = index.head_dim if index else 1
        mtp_indexed = config.mtp_num_layers if index and config.gated_hyper else 0
        state = cls(
            num_slots=num_slots,
            page_size=page_size,
            seq_lens=zeros(rows, kind=torch.int32),
            page_table=torch.full((rows, max_pages_per_slot), -1, dtype=torch.int32, device=device),
            k_cache=zeros(config.num_qsa_layers, *kv_shape),
            v_cache=zeros(config.num_qsa_layers, *kv_shape),
            mtp_k_cache=zeros(config.mtp_num_layers, *kv_shape),
            mtp_v_cache=zeros(config.mtp_num_layers, *kv_shape),
            gdn_state=zeros(
                config.num_gdn_layers,
                rows,
                heads,
                config.linear_key_head_dim,
                config.linear_value_head_dim,
                kind=torch.float32,
            ),
            conv_window=zeros(
                config.num_gdn_layers, rows, config.conv_channels, config.conv_kernel - 1
            ),
            mtp_hidden=zeros(rows, streams if config.gated_hyper else config.hidden_size),
            ple_window=zeros(config.num_ple_layers, rows, streams, ple.window_len if ple else 1),
            ngram_context=torch.full((rows, context), eos_id, dtype=torch.long, device=device),
            index_keys=zeros(
                config.num_qsa_layers if index else 0,
                num_pages,
                page_size // ratio,
                index.head_dim if index else 1,
                kind=index_key_dtype or dtype,
            ),
            index_raw=zeros(
                config.num_qsa_layers if index else 0, rows, ratio, index.head_dim if index else 1
            ),
            index_rope=zeros(rows, ratio, 3, kind=torch.long),
            mtp_index_keys=zeros(
                mtp_indexed, num_pages, page_size // ratio, index_dim, kind=index_key_dtype or dtype
            ),
            mtp_index_raw=zeros(mtp_indexed, rows, ratio, index_dim),
            mtp_draft_raw=zeros(mtp_indexed, rows, ratio, index_dim),
            mtp_draft_rope=zeros(rows, ratio, 3, kind=torch.long),
            ngram_eos=eos_id,
        )
        return state

    @property
    def scratch_row(self) -> int:
        return self.num_slots

    @property
    def max_pages_per_slot(self) -> int:
        return self.page_table.shape[1]

    @property
    def capacity_tokens(self) -> int:
        return self.max_pages_per_slot * self.page_size

    @property
    def num_pages(self) -> int:
        return self.k_cache.shape[1] if self.k_cache.numel() else self.mtp_k_cache.shape[1]

    def slot_rows(self, slot: int | Tensor) -> dict[str, Tensor]:
        """Views of ``slot``'s row in every per-slot tensor."""
        return {name: getattr(self, name).select(dim, slot) for name, dim in SLOT_FIELDS}

    def assign_pages(self, slot: int, pages: list[int]) -> None:
        """Give ``slot`` the pages it reads and writes, in position order."""
        self._check_slot(slot)
        if len(pages) > self.max_pages_per_slot:
            raise ValueError(
                f"slot {slot}: {len(pages)} pages exceed max_pages_per_slot "
                f"{self.max_pages_per_slot}"
            )
        bad = [p for p in pages if not 0 <= p < self.num_pages]
        if bad:
            raise ValueError(f"slot {slot}: page ids {bad} outside [0, {self.num_pages})")
        row = torch.full((self.max_pages_per_slot,), -1, dtype=torch.int32)
        row[: len(pages)] = torch.tensor(pages, dtype=torch.int32)
        self.page_table[slot] = row.to(self.page_table.device)

    def reset_slot(self, slot: int) -> None:
        """Start a new request in ``slot``: length 0, zero state, all-EOS context, pages kept."""
        self._check_slot(slot)
        self.seq_lens[slot] = 0
        for name, row in self.slot_rows(slot).items():
            row.fill_(self.ngram_eos if name == "ngram_context" else 0)

    def snapshot(self, slot: int) -> SlotSnapshot:
        self._check_slot(slot)
        pages = self._used_pages(slot)
        return SlotSnapshot(
            seq_len=self.seq_lens[slot].clone(),
            page_row=self.page_table[slot].clone(),
            rows={name: row.clone() for name, row in self.slot_rows(slot).items()},
            pages={name: getattr(self, name)[:, pages].clone() for name in PAGED_FIELDS},
        )

    def restore(self, slot: int, snapshot: SlotSnapshot) -> None:
        """Write ``snapshot`` back into ``slot``, pages included (into the snapshot's pages)."""
        self._check_slot(slot)
        rows = self.slot_rows(slot)
        if any(snapshot.rows[n].shape != rows[n].shape for n in rows):
            raise ValueError("snapshot was taken from a state of a different shape")
        self.seq_lens[slot] = snapshot.seq_len
        self.page_table[slot] = snapshot.page_row
        for name, row in rows.items():
            row.copy_(snapshot.rows[name])
        pages = self._used_pages(slot)
        for name in PAGED_FIELDS:
            getattr(self, name)[:, pages] = snapshot.pages[name]

    def copy_slot(self, source: int, target: int) -> None:
        """Fork ``source`` into ``target``: same length and state, pages copied into target's."""
        self._check_slot(source)
        self._check_slot(target)
        pages = self._used_pages(source)
        target_pages = self.page_table[target, : pages.numel()].long()
        if bool((target_pages < 0).any()):
            raise ValueError(f"slot {target} lacks the {pages.numel()} pages slot {source} uses")
        self.seq_lens[target] = self.seq_lens[source]
        targets = self.slot_rows(target)
        for name, row in self.slot_rows(source).items():
            targets[name].copy_(row)
        for name in PAGED_FIELDS:
            cache = getattr(self, name)
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
