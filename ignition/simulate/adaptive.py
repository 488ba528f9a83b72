"""Adaptive speculation as today's engines do it, behind the baselines' one interface.

All three keep vLLM's stall-free batching (decoders first, prompt chunks into the
budget left) and change only how much each decoder verifies:

- :class:`DynamicK` (``vllm-dyn``): vLLM's dynamic speculation, K looked up from the
  number of running decoders in a batch-size table (``DYNAMIC_TABLE``: K = 3 up to 8
  decoders, 2 up to 16, 1 up to 32, none beyond; K never above the name's ``-kK``).
- :class:`AdaptiveVerification` (``vllm-adaptive``): vLLM's adaptive verification.
  The drafter reports a confidence per drafted position (``acceptance.Round.signal``,
  the same signal Helios's device allocation reads); a request verifies the prefix of
  its drafts whose survival probability c_1 ... c_d stays at or above one global
  threshold (``SURVIVAL_THRESHOLD``), up to K; the drafter runs as many steps as the
  widest request needs.
- :class:`SGLangTiers` (``sglang-tiers``): SGLang's adaptive speculation among
  pre-captured tiers K = 1 / 3 / 7, switched by an exponential moving average of the
  batch's accept length: up a tier when the EMA reaches ``UP`` of the tier's maximum
  (1 + K), down when it falls below ``DOWN`` of it. (Our reading of the description
  in issue 29; SGLang's own constants may differ.)
"""

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
