"""Adaptive speculation as today's engines do it, behind the baselines' one interface:
vLLM's stall-free batching with per-decoder widths chosen by :class:`DynamicK`
(``vllm-dyn``), :class:`AdaptiveVerification` (``vllm-adaptive``) or
:class:`SGLangTiers` (``sglang-tiers``); docs/simulate.md, "adaptive.py"."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ignition.simulate.steps import Batch, Seq, decode_first

DYNAMIC_TABLE = ((8, 3), (16, 2), (32, 1))  # (at most this many decoders, K)
SURVIVAL_THRESHOLD = 0.35
TIERS = (1, 3, 7)
EMA_WEIGHT = 0.2
UP, DOWN = 0.75, 0.4


@dataclass
class DynamicK:
    name: str = "vllm-dyn"
    budget: int = 2048
    drafts: int = 3  # the most the table may choose
    padded: bool = False
    table: tuple[tuple[int, int], ...] = DYNAMIC_TABLE

    def k_for(self, decoders: int) -> int:
        k = next((k for limit, k in self.table if decoders <= limit), 0)
        return min(k, self.drafts)

    def schedule(
        self, running: Sequence[Seq], waiting: Sequence[Seq], free_slots: int
    ) -> Batch | None:
        k = self.k_for(sum(1 for s in running if s.is_decoding))
        return decode_first(running, waiting, free_slots, self.budget, k)

    def observe(self, batch: Batch, accepted: Sequence[int]) -> None:
        pass


def survival_width(seq: Seq, drafts: int, threshold: float) -> int:
    """1 + the drafts whose prefix survival (by the drafter's confidence) >= threshold."""
    if seq.round is None or not seq.request.acceptance:
        return 1
    width = 1
    for s in seq.round.survival()[:drafts]:
        if s < threshold:
            break
        width += 1
    return width


@dataclass
class AdaptiveVerification:
    name: str = "vllm-adaptive"
    budget: int = 2048
    drafts: int = 5
    padded: bool = False
    threshold: float = SURVIVAL_THRESHOLD

    def schedule(
        self, running: Sequence[Seq], waiting: Sequence[Seq], free_slots: int
    ) -> Batch | None:
        def width(s: Seq) -> int:
            return survival_width(s, self.drafts, self.threshold)

        return decode_first(running, waiting, free_slots, self.budget, self.drafts, width)

    def observe(self, batch: Batch, accepted: Sequence[int]) -> None:
        pass


@dataclass
class SGLangTiers:
    name: str = "sglang-tiers"
    budget: int = 2048
    drafts: int = 7  # the widest tier
    padded: bool = False
    tiers: tuple[int, ...] = TIERS
    tier: int = 1  # index into tiers: start at K = 3
    ema: float | None = field(default=None)

    @property
    def k(self) -> int:
        return min(self.tiers[self.tier], self.drafts)

    def schedule(
        self, running: Sequence[Seq], waiting: Sequence[Seq], free_slots: int
    ) -> Batch | None:
        return decode_first(running, waiting, free_slots, self.budget, self.k)

    def observe(self, batch: Batch, accepted: Sequence[int]) -> None:
        if not batch.decode or batch.drafts == 0:
            return
        length = 1 + sum(accepted) / len(accepted)
        self.ema = (
            length if self.ema is None else (1 - EMA_WEIGHT) * self.ema + (EMA_WEIGHT * length)
        )
        ceiling = 1 + self.k
        if self.ema >= UP * ceiling and self.tier + 1 < len(self.tiers):
            self.tier += 1
        elif self.ema < DOWN * ceiling and self.tier > 0:
            self.tier -= 1
