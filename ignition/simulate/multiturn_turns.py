"""The multi-turn chat workload made concrete: turns with token-id messages, planned
replies and the chat's message endpoints (``workloads.conversations`` gives the timing)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from ignition.simulate.workloads import WorkloadError, conversations

NS_PER_MS = 1_000_000
GENERATION_PROMPT = (1, 2)  # what a chat template appends after the last user message
END_OF_TURN = 3


@dataclass(frozen=True)
class MultiTurnSpec:
    conversations: int = 16
    turns: int = 4
    rate_per_s: float = 4.0  # conversations starting per second
    first_prompt: int = 1024
    turn_prompt: int = 128
    output_tokens: int = 64
    think_ms: float = 1000.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.first_prompt < 3 or self.turn_prompt < 3 or self.output_tokens < 1:
            raise WorkloadError(
                f"conversations: first prompt {self.first_prompt}, turn prompt "
                f"{self.turn_prompt} need at least 3 tokens and output {self.output_tokens} 1"
            )
        if not math.isfinite(self.think_ms) or self.think_ms < 0:
            raise WorkloadError(f"think_ms = {self.think_ms!r}: must be finite and nonnegative")


@dataclass
class Turn:
    conversation: int
    index: int
    planned_ns: int
    user: tuple[int, ...]  # this turn's new message, generation prompt included
    reply: tuple[int, ...]  # the planned output
    prompt: tuple[int, ...] = ()
    ends: tuple[int, ...] = ()
    history: int = 0  # prompt tokens sent before (what a retaining server may hold)
    sent_ns: int = -1
    first_token_ns: int = -1
    finish_ns: int = -1
    cached: int = 0
    output: tuple[int, ...] = ()

    @property
    def name(self) -> str:
        return f"c{self.conversation}t{self.index}"


def build_turns(spec: MultiTurnSpec) -> list[list[Turn]]:
    """Per conversation, its turns with their messages and planned replies."""
    requests = conversations(
        spec.conversations,
        spec.turns,
        rate_per_s=spec.rate_per_s,
        first_prompt=spec.first_prompt,
        turn_prompt=spec.turn_prompt,
        output_tokens=spec.output_tokens,
        think_ms=spec.think_ms,
        seed=spec.seed,
    )
    rng = random.Random(spec.seed + 1)
    out: list[list[Turn]] = [[] for _ in range(spec.conversations)]
    for r in sorted(requests, key=lambda r: (r.conversation, r.turn)):
        size = spec.first_prompt if r.turn == 0 else spec.turn_prompt
        body = tuple(rng.randrange(100, 30000) for _ in range(size - len(GENERATION_PROMPT)))
        reply = tuple(rng.randrange(100, 30000) for _ in range(r.output_tokens))
        planned = round(r.arrival_ms * NS_PER_MS)
        user = body + GENERATION_PROMPT
        out[r.conversation].append(Turn(r.conversation, r.turn, planned, user, reply))
    for turns in out:
        history: tuple[int, ...] = ()
        ends: tuple[int, ...] = ()
        for t in turns:
            t.history = len(history)
            t.prompt = history + t.user
            t.ends = (*ends, len(t.prompt) - len(GENERATION_PROMPT))
            history = (*t.prompt, *t.reply, END_OF_TURN)
            ends = (*t.ends, len(history))
    return out


def parse_rows_list(text: str) -> list[int]:
    """``0,4,16``: snapshot row counts to compare (0 is retention off)."""
    try:
        rows = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise WorkloadError(
            f"--snapshot-rows {text!r}: expected comma-separated row counts"
        ) from None
    if not rows or any(r < 0 for r in rows):
        raise WorkloadError(f"--snapshot-rows {text!r}: needs nonnegative row counts")
    return rows
