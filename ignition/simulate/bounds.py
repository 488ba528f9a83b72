"""The decode-throughput ceiling: the highest output rate any policy can sustain, the
best full frame of B decoders at width W, B * E[out(W)] tokens in T(B, W) ms
(docs/simulate.md, "bounds.py")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ignition.components.program_kinds import GraphKind
from ignition.simulate.devices import DeviceModel, Execution


@dataclass(frozen=True)
class Ceiling:
    """The best frame: B rows, W target rows each, T ms, tokens per ms over all rows."""

    batch: int
    width: int
    duration_ms: float
    tokens_per_ms: float


def expected_output(acceptance: Sequence[float], width: int) -> float:
    """1 + s_1 + ... + s_(W-1), s_d the joint probability that d drafts survive."""
    total, joint = 1.0, 1.0
    for p in acceptance[: width - 1]:
        joint *= p
        total += joint
    return total


def throughput_ceiling(
    device: DeviceModel,
    slots: int,
    acceptance: Sequence[float],
    *,
    envelope: int | None = None,
    context_per_row: int = 1400,
    prompt_tokens: int = 0,
    max_width: int | None = None,
) -> Ceiling:
    """The highest B * E[out(W)] / T(B, W) over B <= ``slots`` rows and widths W (with
    B * W <= ``envelope`` when given), each frame also carrying ``prompt_tokens``."""
    if slots < 1:
        raise ValueError(f"throughput ceiling: slots {slots} must be at least 1")
    widest = max_width or len(acceptance) + 1
    best: Ceiling | None = None
    for b in range(1, slots + 1):
        for w in range(1, widest + 1):
            if envelope is not None and w > 1 and b * w > envelope:
                break
            n = b * w + prompt_tokens
            kind = GraphKind.SPECULATIVE if w > 1 else GraphKind.DECODE
            rows = b + (1 if prompt_tokens else 0)
            execution = Execution(kind, n, rows, n, rows, b * context_per_row, w - 1)
            t = device.duration_ms(execution)
            rate = b * expected_output(acceptance, w) / t
            if best is None or rate > best.tokens_per_ms:
                best = Ceiling(b, w, t, rate)
    assert best is not None
    return best
