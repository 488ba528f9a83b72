"""Policy names: every baseline behind one interface (``steps.BaselinePolicy``), and
Helios. Families are ``FAMILIES`` (each described in docs/simulate.md, "baselines.py");
names are ``NAME[-bBUDGET][-kK][-padded]``, ``-padded`` running each step at vLLM V1's
CUDA-graph capture size that holds it (``capture.py``). ``helios+VARIANT[+VARIANT]`` is
an experiment on Helios (``HELIOS_VARIANTS``; ``rN``: speculative token capacity N,
``wN``: fixed speculation at verification width N)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ignition.simulate.adaptive import AdaptiveVerification, DynamicK, SGLangTiers
from ignition.simulate.steps import (
    BaselinePolicy,
    Batch,
    DecodeFirst,
    PrefillFirst,
    Seq,
    decode_first,
)

__all__ = ["BaselinePolicy", "Batch", "DecodeFirst", "PrefillFirst", "Seq", "decode_first"]


class PolicyError(ValueError):
    """An unknown or malformed policy name; the message names it and the known ones."""


@dataclass(frozen=True)
class _Family:
    make: Callable[..., BaselinePolicy]
    budget: int
    summary: str


FAMILIES: dict[str, _Family] = {
    "vllm": _Family(DecodeFirst, 2048, "vLLM-v1-style: FCFS, decode first, chunked prefill"),
    "sarathi": _Family(DecodeFirst, 512, "Sarathi-style: stall-free, small fixed budget"),
    "prefill-first": _Family(PrefillFirst, 8192, "SGLang-style default: prefill first"),
    "vllm-dyn": _Family(DynamicK, 2048, "vLLM dynamic speculation: K by batch size"),
    "vllm-adaptive": _Family(
        AdaptiveVerification, 2048, "vLLM adaptive verification: widths from confidence"
    ),
    "sglang-tiers": _Family(SGLangTiers, 2048, "SGLang adaptive tiers K = 1/3/7 by EMA"),
}
SPECULATING = ("vllm-dyn", "vllm-adaptive", "sglang-tiers")  # K is their own choice
DEFAULT_MAX_DRAFTS = {"vllm-dyn": 3, "vllm-adaptive": 5, "sglang-tiers": 7}
HELIOS = "helios"
HELIOS_VARIANTS = {
    "keep-left-out": "prompt frames may leave ready decoders out at their one-frame score "
    "(before issue 29's rule, helios/left_out.py)",
    "normalizer-newcomer": "newcomers start at the token normalizer (the earlier rule)",
    "generation-newcomer": "newcomers start at the best generation graph's per-stream rate",
    "whole-prompt-newcomer": "the balanced newcomer start without its bound by the prompt a "
    "request can absorb (the rule before the later-turn study)",
    "wide-mixed": "what-if catalog: wider mixed widths also at the 2048 prompt bucket",
    "trained": "acceptance preseeded with each request's true prefix survivals",
    "throughput": "the seed's throughput preset (delivery fairness and age price zero)",
    "full-batch": "load-time selection: generation and mixed programs at the full batch only",
    "one-frame": "what-if transport: plan the next frame only when the device is idle",
    "row-oracle": "what-if cost model: before each plan every measured program's estimate is "
    "the device's duration at the rows it could carry now (cost_what_ifs.py)",
    "ple-stall": "what-if cost samples: the decode tokens' PLE gather reported as readiness "
    "stall, so estimates leave it out (the spec's embedding-delivery rule, read literally)",
    "no-refresh": "what-if: the timing-refresh ledger never earns credit (no refresh runs)",
    "no-learning": "what-if: the acceptance-learning ledger never earns credit (no probe "
    "runs)",
    "prompt-pairs": "what-if admission: with two slots free, the next two prompts' rows "
    "are gathered back to back and the first is held until the second's are ready, so "
    "both can share one frame (a hold rule foreseeing row readiness; sim.py)",
    "late-queue": "what-if transport: fill the second frame slot 1 ms (a host round trip) "
    "before the frame ahead ends, not at once",
    "at-once": "the transport before the just-in-time second slot: the second frame slot "
    "is filled as soon as it is free (RuntimeOptions.queue_lead_ms = None; "
    "--scheduler-queue-lead-ms off)",
    "jit-queue": "what-if transport: fill the second frame slot 2 ms (plan and launch) "
    "before the frame ahead is expected to end by Helios's estimate; a frame ending "
    "earlier leaves the device idle until then (jit_queue.py)",
    "jit-wake": "jit-queue whose host also wakes on the frame's completion: a frame ending "
    "early is followed after the plan's 1.15 ms, not at the estimated end (jit_queue.py)",
    "first-delivery": "the chunk finishing a prompt also earns the delivery price at the "
    "delivery normalizer (PolicyConfig.first_delivery = 1)",
    "ragged": "what-if catalog: host-allocated speculative programs at half the rows of "
    "B x W (per-request widths below full batch; helios_catalog.ragged_host_shapes)",
    "balanced": "the seed's balanced preset (its coefficients, no issue-40 rule)",
    "flat-cadence": "the objective preset before the cadence ramp: balanced coefficients "
    "and the 75 ms TBT target, delivery and age prices in full at every age",
    "gen-left-out": "generation frames leaving ready decoders out are scored as the "
    "sequence with the frame they then need (PolicyConfig.generation_left_out)",
    "no-tbt": "no TBT target (PolicyConfig.tbt_target_ms = 0)",
    "twin": "a mixed program offers no decode-only cohort where its generation twin exists "
    "(PolicyConfig.generation_twin = true)",
    "prompt-runs": "a started prompt's chunks follow one another while every ready decoder "
    "stays within the TBT target (PolicyConfig.prompt_runs = true)",
    "no-prompt-runs": "generation frames compete between a prompt's chunks (PolicyConfig."
    "prompt_runs = false)",
    "no-twin": "mixed programs offer the seed's decode-only cohort (PolicyConfig."
    "generation_twin = false)",
    "step8": "what-if catalog: generation batch buckets 1, 2, 4, then every multiple of 8 "
    "(mixed programs stay powers of two)",
    "rec-lanes": "build with the load option prompt_lanes {512: 4, 1024: 4, 2048: 2, "
    "4096: 2} (the qwen38 recipe's recommended lanes, issue 39)",
    "seed-buckets": "what-if catalog: the seed's prompt buckets at every slot count (without "
    "the qwen38 recipe's more_prompt_buckets for builds of 32 slots or more)",
    "seed-lanes": "what-if catalog: capacity.prompt_lanes alone at every slot count (without "
    "the qwen38 recipe's concurrency-step prompt_lanes for builds of 32 slots or more)",
    "mixed-width": "a winning mixed frame runs at the sibling width whose value net of the "
    "generation rate is highest (PolicyConfig.mixed_width = true; decide/mixed_width.py)",
    "no-mixed-width": "a winning mixed frame keeps its width, the narrowest by value per ms "
    "(PolicyConfig.mixed_width = false; the rule before decide/mixed_width.py)",
    "seed-wide": "what-if catalog: wider mixed widths at the balanced prompt bucket only "
    "(without the qwen38 recipe's 8-slot step mixed_wide_prompt_buckets [1024])",
    "pow2-batches": "what-if catalog: power-of-two decode and speculative batch buckets at "
    "every slot count (without the qwen38 recipe's batch_bucket_step 8 for builds of 32 "
    "slots or more)",
    "request-optimism": "a request's optimistic acceptance is its own bound alone, not "
    "bounded by its population (PolicyConfig.population_bounded_optimism = false; the "
    "rule before issue 39's population bound)",
    "moving-bound": "the population's optimism bound reads the prior's moving mean plus its "
    "start's pull at min(n, 64) observations (PolicyConfig.population_bound_memory = 0; "
    "the bound's first form)",
    "spec-target": "a speculative frame carrying no prompt whose estimate exceeds the TBT "
    "target is rejected, probes included (PolicyConfig.speculation_within_target = true; "
    "decide/chunk_target.py)",
    "wide-past-target": "speculative frames carrying no prompt are not bound by the TBT "
    "target (PolicyConfig.speculation_within_target = false; the rule before it)",
    "refresh-any": "timing refresh may run any stale alternative, the oldest first "
    "(PolicyConfig.refresh_could_win = false; the seed's rule)",
    "refresh-could-win": "timing refresh runs only a stale alternative whose score at its "
    "fastest recent sample beats the winner (PolicyConfig.refresh_could_win = true; "
    "decide/refresh.py)",
    "l1": "load-time selection: one prompt lane per program (the seed's prefill and mixed "
    "programs; issue 39's L = 1)",
}
_ENVELOPE = re.compile(r"^r(?P<r>[1-9]\d*)$")  # helios+r192: a what-if build R
# helios+grid256: prompt buckets also at every multiple of 256 from 1024 tokens up
_GRID = re.compile(r"^grid(?P<g>[1-9]\d*)$")
# helios+lanes4: 4 lanes at every prompt bucket; helios+lanes4-1024: at buckets <= 1024
_LANES = re.compile(r"^lanes(?P<l>[1-9]\d*)(?:-(?P<m>[1-9]\d*))?$")
_WIDTH = re.compile(r"^w(?P<w>[1-9]\d*)$")  # helios+w3: fixed width three
_CHUNK = re.compile(r"^chunk(?P<c>[1-9]\d*)$")  # helios+chunk512: --max-prefill-chunk 512
_TBT = re.compile(r"^tbt(?P<t>[1-9]\d*)$")  # helios+tbt100: PolicyConfig.tbt_target_ms 100
_SLOT = re.compile(r"^slot(?P<s>\d+)$")  # helios+slot2: PolicyConfig.slot_pressure 2
_RAMP = re.compile(r"^ramp(?P<p>\d+)$")  # helios+ramp2: PolicyConfig.cadence_ramp 2
# helios+wide1024: wider mixed widths at every prompt bucket of at least 1024 tokens
_WIDE = re.compile(r"^wide(?P<b>[1-9]\d*)$")
# helios+jit5ms: the just-in-time second slot at a 5 ms lead (RuntimeOptions.queue_lead_ms)
_JIT = re.compile(r"^jit(?P<l>[1-9]\d*)ms$")


def _number(pattern: re.Pattern[str], variant: str) -> int | None:
    """The one integer a parametric variant name carries, or None if it is not that variant."""
    m = pattern.match(variant)
    return int(m.group(1)) if m else None


def envelope_variant(variant: str) -> int | None:
    """``rN``: Helios on a catalog built with speculative token capacity N."""
    return _number(_ENVELOPE, variant)


def width_variant(variant: str) -> int | None:
    """``wN``: Helios with fixed verification width N (N - 1 drafts per decoder)."""
    return _number(_WIDTH, variant)


def chunk_variant(variant: str) -> int | None:
    """``chunkN``: Helios loading prompt capacities up to N tokens only (the load-time
    selection ``--max-prefill-chunk N`` makes; vLLM's ``--max-num-batched-tokens``)."""
    return _number(_CHUNK, variant)


def lanes_variant(variant: str) -> tuple[int, int] | None:
    """``lanesN[-M]``: Helios on a catalog whose recipe declares N prompt lanes at every
    prompt bucket (up to M tokens) (``capacity.prompt_lanes``; a what-if build, issue 39):
    (N, M), M = 0 for every bucket."""
    m = _LANES.match(variant)
    return (int(m.group("l")), int(m.group("m") or 0)) if m else None


def grid_variant(variant: str) -> int | None:
    """``gridN``: a what-if catalog whose prompt buckets also lie at every multiple of N
    tokens from 1024 up to the recipe's largest (issue 39's padding study)."""
    return _number(_GRID, variant)


def tbt_variant(variant: str) -> int | None:
    """``tbtN``: Helios with ``PolicyConfig.tbt_target_ms`` = N (issue 40's chunk rule)."""
    return _number(_TBT, variant)


def slot_variant(variant: str) -> int | None:
    """``slotN``: Helios with ``PolicyConfig.slot_pressure`` = N (0: off)."""
    return _number(_SLOT, variant)


def ramp_variant(variant: str) -> int | None:
    """``rampP``: Helios with ``PolicyConfig.cadence_ramp`` = P (0: off)."""
    return _number(_RAMP, variant)


def wide_variant(variant: str) -> int | None:
    """``wideN``: a what-if catalog with every wider mixed width also at every prompt
    bucket of at least N tokens (``capacity.mixed_wide_prompt_buckets``)."""
    return _number(_WIDE, variant)


def jit_variant(variant: str) -> int | None:
    """``jitNms``: the just-in-time second slot (``RuntimeOptions.queue_lead_ms`` = N): the
    host plans a lead of N ms before the frame ahead is expected to end and also wakes on
    its completion (``jit-wake`` at that lead)."""
    return _number(_JIT, variant)


PARAMETRIC_VARIANTS = (
    envelope_variant,
    width_variant,
    chunk_variant,
    lanes_variant,
    grid_variant,
    tbt_variant,
    slot_variant,
    ramp_variant,
    wide_variant,
    jit_variant,
)


def variant_summary(variant: str) -> str:
    wide = wide_variant(variant)
    if wide is not None:
        return f"what-if catalog: wider mixed widths at every prompt bucket from {wide} tokens"
    grid = grid_variant(variant)
    if grid is not None:
        return f"what-if catalog: prompt buckets also at every multiple of {grid} from 1024 up"
    lanes = lanes_variant(variant)
    if lanes is not None:
        upto = f" up to {lanes[1]} tokens" if lanes[1] else ""
        return f"what-if build: {lanes[0]} prompt lanes at every prompt bucket{upto}"
    c = chunk_variant(variant)
    if c is not None:
        return f"load-time selection: prompt capacities up to {c} tokens only"
    lead = jit_variant(variant)
    if lead is not None:
        return (
            f"transport: plan the second frame slot {lead} ms before the frame ahead is "
            "expected to end, and on its completion (RuntimeOptions.queue_lead_ms)"
        )
    ramp = ramp_variant(variant)
    if ramp is not None:
        return f"cadence ramp {ramp}: delivery and age prices times min(1, age / TBT target)^{ramp}"
    sp = slot_variant(variant)
    if sp is not None:
        return f"slot pressure {sp}: decoders' output tokens worth more while requests wait"
    t = tbt_variant(variant)
    if t is not None:
        return f"TBT target {t} ms: prompt frames sized to keep the decoders' gap within it"
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
    r"^(?P<family>prefill-first|vllm-dyn|vllm-adaptive|sglang-tiers|[a-z]+)"
    r"(?:-b(?P<budget>\d+))?(?:-k(?P<k>\d+))?(?P<padded>-padded)?$"
)


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
            parametric = any(f(v) is not None for f in PARAMETRIC_VARIANTS)
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
    default = DEFAULT_MAX_DRAFTS.get(m.group("family"), 0)
    drafts = int(m.group("k")) if m.group("k") else default
    if budget < 1 + drafts:
        raise PolicyError(f"policy {text!r}: budget {budget} below one decoder's 1 + {drafts}")
    padded = m.group("padded") is not None
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
    if name.family in SPECULATING:
        drafts = f", at most K = {name.drafts} drafts"
    padded = ", padded to vLLM's CUDA-graph capture sizes" if name.padded else ""
    return f"{summary}, budget {name.budget}{drafts}{padded}"
