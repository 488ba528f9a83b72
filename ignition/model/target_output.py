"""What one packed target forward produced, before anything is committed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from torch import Tensor

from ignition.model.layers.gdn import GdnUpdate
from ignition.model.layers.ngram_ple import PleUpdate
from ignition.model.packing import PackedMeta, gather_rows
from ignition.model.state import ModelState


@dataclass
class TargetOutput:
    """One forward's outputs; programs project only the rows they sample (:meth:`logits_at`)."""

    meta: PackedMeta
    state: ModelState  # the state the forward read and the commit will write
    hidden: Tensor  # [T, hidden] final-normed, the MTP head's input
    gdn_updates: list[GdnUpdate]
    project: Callable[[Tensor], Tensor]  # final-normed hidden [..., hidden] -> fp32 logits
    ple_updates: list[PleUpdate] = field(default_factory=list)
    index_raw: list[Tensor] = field(default_factory=list)  # [T, d] per indexed QSA layer
    ngram_next: Tensor | None = None  # [T, ngram_size - 1] n-gram context after each token
    rope: Tensor | None = None  # [3, T] rope positions (the indexer's ring keeps them)
    streams: Tensor | None = None  # [T, S * hidden] pre-mixer streams (the gated MTP's input)
    _all_logits: Tensor | None = field(default=None, repr=False)

    def logits_at(self, index: Tensor) -> Tensor:
        """fp32 logits at packed ``index`` (``index == T`` reads a zero row)."""
        return self.project(gather_rows(self.hidden, index))

    @property
    def logits(self) -> Tensor:
        """[T, vocab] fp32 logits of every packed position (computed once, on demand)."""
        if self._all_logits is None:
            self._all_logits = self.project(self.hidden)
        return self._all_logits
