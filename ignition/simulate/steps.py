"""The baseline engine's step policies behind :class:`BaselinePolicy`: each step's
:class:`Batch` from the admitted, waiting and free slots, then each decoder's accepted
drafts observed. :class:`DecodeFirst` (``vllm``, ``sarathi``) and :class:`PrefillFirst`
(``prefill-first``); docs/simulate.md, "steps.py"."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ignition.simulate.acceptance import Round
from ignition.simulate.results import RequestRecord
from ignition.simulate.workloads import SimRequest


@dataclass(eq=False)
class Seq:
    """A request inside a baseline engine."""

    request: SimRequest
    record: RequestRecord
    prefilled: int = 0
    generated: int = 0
    round: Round | None = None  # this step's speculative round (true acceptance, signal)
    ready_ms: float | None = None  # when its prompt's PLE rows are on the device

    @property
    def prompt_left(self) -> int:
        return self.request.prompt_tokens - self.prefilled

    @property
    def is_decoding(self) -> bool:
        return self.prompt_left == 0 and self.generated < self.request.output_tokens

    @property
    def context(self) -> int:
        return self.prefilled + self.generated


@dataclass(frozen=True)
class Batch:
    """One step: prompt chunks ``(seq, tokens)`` and decoders. The drafter runs ``drafts``
    steps; decoder i verifies ``widths[i]`` tokens (at most 1 + drafts), or 1 + drafts
    each when ``widths`` is empty (a uniform batch)."""

    prefill: tuple[tuple[Seq, int], ...] = ()
    decode: tuple[Seq, ...] = ()
    drafts: int = 0
    widths: tuple[int, ...] = ()

    def width(self, i: int) -> int:
        return self.widths[i] if self.widths else 1 + self.drafts

    @property
    def uniform(self) -> bool:
        return not self.widths or all(w == 1 + self.drafts for w in self.widths)

    @property
    def tokens(self) -> int:
        decode = sum(self.widths) if self.widths else len(self.decode) * (1 + self.drafts)
        return sum(n for _, n in self.prefill) + decode

    @property
    def is_empty(self) -> bool:
        return not self.prefill and not self.decode


class BaselinePolicy(Protocol):
    name: str
    budget: int
    drafts: int
    padded: bool  # steps run at vLLM's capture sizes (``capture.py``), not eagerly

    def schedule(
        self, running: Sequence[Seq], waiting: Sequence[Seq], free_slots: int
    ) -> Batch | None: ...

    def observe(self, batch: Batch, accepted: Sequence[int]) -> None:
        """Accepted drafts of each decoder of the step just run (adaptive policies)."""


def _fill_prompts(
    running: Sequence[Seq], waiting: Sequence[Seq], free_slots: int, budget: int
) -> list[tuple[Seq, int]]:
    """Partial prompts of admitted requests first, then new requests FCFS (one slot
    each), each chunked to the budget left."""
    chunks: list[tuple[Seq, int]] = []
    for s in running:
        if budget <= 0:
            return chunks
        if s.prompt_left > 0:
            n = min(s.prompt_left, budget)
            chunks.append((s, n))
            budget -= n
    for s in waiting:
        if budget <= 0 or free_slots <= 0:
            break
        n = min(s.prompt_left, budget)
        chunks.append((s, n))
        budget -= n
        free_slots -= 1
    return chunks


def decode_first(
    running: Sequence[Seq],
    waiting: Sequence[Seq],
    free_slots: int,
    budget: int,
    drafts: int,
    width: Callable[[Seq], int] | None = None,
) -> Batch | None:
    """The stall-free rule: every decoder that fits (``width(seq)`` tokens each, else
    1 + drafts), then prompt chunks into the budget left."""
    decode, widths = [], []
    for s in running:
        w = width(s) if width is not None else 1 + drafts
        if s.is_decoding and budget >= w:
            decode.append(s)
            widths.append(w)
            budget -= w
    prefill = _fill_prompts(running, waiting, free_slots, budget)
    if width is not None and decode:
        drafts = max(widths) - 1
    batch = Batch(
        tuple(prefill),
        tuple(decode),
        drafts if decode else 0,
        tuple(widths) if width is not None else (),
    )
    return None if batch.is_empty else batch


@dataclass
class DecodeFirst:
    """Decoders first, then prompt chunks into the token budget left (stall-free)."""

    name: str = "vllm"
    budget: int = 2048
    drafts: int = 0
    padded: bool = False

    def schedule(
        self, running: Sequence[Seq], waiting: Sequence[Seq], free_slots: int
    ) -> Batch | None:
        return decode_first(running, waiting, free_slots, self.budget, self.drafts)

    def observe(self, batch: Batch, accepted: Sequence[int]) -> None:
        pass


@dataclass
class PrefillFirst:
    """Prompt-only batches whenever prompt work can run; decoders wait for them."""

    name: str = "prefill-first"
    budget: int = 8192
    drafts: int = 0
    padded: bool = False

    def schedule(
        self, running: Sequence[Seq], waiting: Sequence[Seq], free_slots: int
    ) -> Batch | None:
        prefill = _fill_prompts(running, waiting, free_slots, self.budget)
        if prefill:
            return Batch(tuple(prefill))
        decode = tuple(s for s in running if s.is_decoding)
        return Batch((), decode, self.drafts) if decode else None

    def observe(self, batch: Batch, accepted: Sequence[int]) -> None:
        pass
