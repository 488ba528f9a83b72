"""Fixed baseline policies: what a conventional serving engine would run each step.

Each policy is a small class behind :class:`BaselinePolicy`: given the admitted
requests (holding slots, in admission order), the arrived but unadmitted ones (in
arrival order) and the free slots, it returns one :class:`Batch` (prompt chunks and
decoders) or ``None``. The engine (``engine.py``) executes it on the shared device
model, so baselines and Helios differ only in what they choose.

- :class:`DecodeFirst` (``vllm``, ``vllm-k3``, ``vllm-b8192``, ``sarathi``): the
  vLLM-v1 / Sarathi-Serve "stall-free" rule. Every running decoder joins first
  (each costs 1 + K tokens of the budget with K fixed drafts), then partial prompts,
  then new requests FCFS, each prompt chunked to the budget left. Sarathi is the
  same rule at a small budget chosen for its cadence (512 by default).
- :class:`PrefillFirst` (``prefill-first``, SGLang's default without mixed chunks):
  whenever prompt work can run, a prompt-only batch up to the chunk budget runs and
  decoders wait; otherwise every decoder runs.

Names: ``NAME[-bBUDGET][-kK][-padded]``, e.g. ``vllm-b8192-k3``; ``-padded`` runs each
step at vLLM V1's CUDA-graph capture size that holds it (``capture.py``), as real vLLM
does, instead of an eager batch of exactly its work (``vllm`` and ``sarathi`` only).
``helios`` is the Helios scheduler itself, ``helios+VARIANT[+VARIANT]`` an experiment
on it (see ``harness.py`` and ``HELIOS_VARIANTS``; ``rN`` builds with speculative token
capacity N, ``wN`` runs fixed speculation at verification width N).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ignition.simulate.results import RequestRecord
from ignition.simulate.workloads import SimRequest


class PolicyError(ValueError):
    """An unknown or malformed policy name; the message names it and the known ones."""


@dataclass(eq=False)
class Seq:
    """A request inside a baseline engine."""

    request: SimRequest
    record: RequestRecord
    prefilled: int = 0
    generated: int = 0

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
    """One step: prompt chunks ``(seq, tokens)`` and decoders, each verifying 1 + drafts."""

    prefill: tuple[tuple[Seq, int], ...] = ()
    decode: tuple[Seq, ...] = ()
    drafts: int = 0

    @property
    def tokens(self) -> int:
        return sum(n for _, n in self.prefill) + len(self.decode) * (1 + self.drafts)

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
        budget = self.budget
        decode = []
        for s in running:
            if s.is_decoding and budget >= 1 + self.drafts:
                decode.append(s)
                budget -= 1 + self.drafts
        prefill = _fill_prompts(running, waiting, free_slots, budget)
        batch = Batch(tuple(prefill), tuple(decode), self.drafts if decode else 0)
        return None if batch.is_empty else batch


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


@dataclass(frozen=True)
class _Family:
    make: Callable[..., BaselinePolicy]
    budget: int
    summary: str


FAMILIES: dict[str, _Family] = {
    "vllm": _Family(DecodeFirst, 2048, "vLLM-v1-style: FCFS, decode first, chunked prefill"),
    "sarathi": _Family(DecodeFirst, 512, "Sarathi-style: stall-free, small fixed budget"),
    "prefill-first": _Family(PrefillFirst, 8192, "SGLang-style default: prefill first"),
}
HELIOS = "helios"
HELIOS_VARIANTS = {
    "normalizer-newcomer": "newcomers start at the token normalizer (the earlier rule)",
    "generation-newcomer": "newcomers start at the best generation graph's per-stream rate",
    "whole-prompt-newcomer": "the balanced newcomer start without its bound by the prompt a "
    "request can absorb (the rule before the later-turn study)",
    "wide-mixed": "what-if catalog: wider mixed widths also at the 2048 prompt bucket",
    "trained": "acceptance preseeded with each request's true prefix survivals",
    "throughput": "the seed's throughput preset (delivery fairness and age price zero)",
    "chunk2048": "load-time selection: prompt capacities up to 2048 tokens only",
    "full-batch": "load-time selection: generation and mixed programs at the full batch only",
    "one-frame": "what-if transport: plan the next frame only when the device is idle",
    "late-queue": "what-if transport: fill the second frame slot 1 ms (a host round trip) "
    "before the frame ahead ends, not at once",
    "first-delivery": "the chunk finishing a prompt also earns the delivery price at the "
    "delivery normalizer (PolicyConfig.first_delivery = 1)",
    "step8": "what-if catalog: generation batch buckets 1, 2, 4, then every multiple of 8 "
    "(mixed programs stay powers of two)",
}
_ENVELOPE = re.compile(r"^r(?P<r>[1-9]\d*)$")  # helios+r192: a what-if build R
_WIDTH = re.compile(r"^w(?P<w>[1-9]\d*)$")  # helios+w3: fixed width three


def envelope_variant(variant: str) -> int | None:
    """``rN``: Helios on a catalog built with speculative token capacity N."""
    m = _ENVELOPE.match(variant)
    return int(m.group("r")) if m else None


def width_variant(variant: str) -> int | None:
    """``wN``: Helios with fixed verification width N (N - 1 drafts per decoder)."""
    m = _WIDTH.match(variant)
    return int(m.group("w")) if m else None


def variant_summary(variant: str) -> str:
    r = envelope_variant(variant)
    if r is not None:
        return f"what-if build: speculative token capacity R = {r}"
    w = width_variant(variant)
    if w is not None:
        return (
            f"fixed speculation at verification width {w}: load-time selection of the "
            f"width-{w} generation and mixed programs"
        )
    return HELIOS_VARIANTS[variant]


_NAME = re.compile(
    r"^(?P<family>[a-z]+(?:-first)?)(?:-b(?P<budget>\d+))?(?:-k(?P<k>\d+))?(?P<padded>-padded)?$"
)
PADDED_FAMILIES = ("vllm", "sarathi")  # engines whose graphs follow vLLM's capture sizes


@dataclass(frozen=True)
class PolicyName:
    """A parsed policy name: family with its budget and fixed drafts."""

    text: str
    family: str
    budget: int = 0
    drafts: int = 0
    padded: bool = False
    extras: dict = field(default_factory=dict)


def parse_policy(text: str) -> PolicyName:
    """``helios`` or ``FAMILY[-bBUDGET][-kK][-padded]``; anything else is one line naming it."""
    known = ", ".join(
        [HELIOS, *FAMILIES, "<family>-b<budget>", "<family>-k<drafts>", "<family>-padded"]
    )
    if text == HELIOS or text.startswith(HELIOS + "+"):
        variants = text.split("+")[1:]
        for v in variants:
            parametric = envelope_variant(v) is not None or width_variant(v) is not None
            if v not in HELIOS_VARIANTS and not parametric:
                known_variants = ", ".join(HELIOS_VARIANTS)
                raise PolicyError(
                    f"unknown Helios variant {v!r} in {text!r} (known: {known_variants})"
                )
        return PolicyName(text, HELIOS, extras={"variants": tuple(variants)})
    m = _NAME.match(text)
    if m is None or m.group("family") not in FAMILIES:
        raise PolicyError(f"unknown policy {text!r} (known: {known})")
    family = FAMILIES[m.group("family")]
    budget = int(m.group("budget")) if m.group("budget") else family.budget
    drafts = int(m.group("k")) if m.group("k") else 0
    if budget < 1 + drafts:
        raise PolicyError(f"policy {text!r}: budget {budget} below one decoder's 1 + {drafts}")
    padded = m.group("padded") is not None
    if padded and m.group("family") not in PADDED_FAMILIES:
        raise PolicyError(
            f"policy {text!r}: -padded follows vLLM's capture sizes "
            f"(only {', '.join(PADDED_FAMILIES)})"
        )
    return PolicyName(text, m.group("family"), budget, drafts, padded)


def make_baseline(text: str) -> BaselinePolicy:
    name = parse_policy(text)
    if name.family == HELIOS:
        raise PolicyError("helios is not a baseline; run it through harness.run_policy")
    return FAMILIES[name.family].make(
        name=text, budget=name.budget, drafts=name.drafts, padded=name.padded
    )


def describe(text: str) -> str:
    name = parse_policy(text)
    if name.family == HELIOS:
        extra = "; ".join(variant_summary(v) for v in name.extras.get("variants", ()))
        base = "Helios (value per execution time over the prepared catalog)"
        return f"{base}; {extra}" if extra else base
    summary = FAMILIES[name.family].summary
    drafts = f", fixed K = {name.drafts} MTP drafts" if name.drafts else ", no speculation"
    padded = ", padded to vLLM's CUDA-graph capture sizes" if name.padded else ""
    return f"{summary}, budget {name.budget}{drafts}{padded}"
