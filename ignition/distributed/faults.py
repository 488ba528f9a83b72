"""Test-only fault injection: ``IGNITION_TEST_RANK_FAULT=RANK:STAGE:TOKEN[,...]`` makes rank
RANK raise at STAGE (launch, run, wait) for frames of prompts starting with token TOKEN."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ignition.helios import LaneRole, LaneWork, RequestHandle
from ignition.runtime.loop.faults import InjectedFault

ENV = "IGNITION_TEST_RANK_FAULT"
STAGES = ("launch", "run", "wait")
PromptOf = Callable[[RequestHandle], tuple[int, ...]]


@dataclass(frozen=True)
class RankFault:
    rank: int
    stage: str
    token_id: int

    @classmethod
    def parse(cls, text: str) -> RankFault:
        parts = text.split(":")
        if len(parts) != 3 or parts[1] not in STAGES or not (parts[0] + parts[2]).isdigit():
            raise ValueError(f"{ENV} = {text!r}: expected RANK:STAGE:TOKEN, STAGE one of {STAGES}")
        return cls(int(parts[0]), parts[1], int(parts[2]))

    @classmethod
    def from_env(cls) -> tuple[RankFault, ...]:
        text = os.environ.get(ENV, "")
        return tuple(cls.parse(item.strip()) for item in text.split(",") if item.strip())

    def check(self, rank: int, stage: str, lanes: Iterable[LaneWork], prompt_of: PromptOf) -> None:
        """Raise InjectedFault when this rank, at this stage, holds a marked request."""
        if rank != self.rank or stage != self.stage:
            return
        for lane in lanes:
            if lane.role is LaneRole.INIT:
                continue
            prompt = prompt_of(lane.handle)
            if prompt and prompt[0] == self.token_id:
                raise InjectedFault(f"rank {rank}: injected {stage} fault ({ENV})")
