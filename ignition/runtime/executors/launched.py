"""A program frame in flight: what its launch bound, kept until its outputs are read."""

from __future__ import annotations

from dataclasses import dataclass

from ignition.compiler.graph import InflightRun
from ignition.compiler.programs import Program
from ignition.helios import Fence, LaneWork, ScheduledPlan
from ignition.model.prompt_logprobs import PromptScores
from ignition.runtime.executors.prompt_scoring import PromptJob
from ignition.runtime.grammar import GrammarState
from ignition.runtime.ple.mailbox import Delivery


@dataclass
class LaunchedFrame:
    fence: Fence
    plan: ScheduledPlan
    program: Program
    inflight: InflightRun  # outputs readable after ``inflight.wait()``
    launched_ns: int  # perf_counter_ns when the frame was enqueued
    lanes: tuple[LaneWork, ...]
    eos: tuple[frozenset[int], ...]
    num_logprobs: tuple[int | None, ...] = ()  # per lane: alternatives asked for, None = none
    grammars: tuple[GrammarState | None, ...] = ()  # per lane: its matcher, None = none
    prompt_job: tuple[PromptJob, ...] = ()  # per prompt lane that asked for prompt logprobs
    prompt_scores: tuple[PromptScores, ...] = ()  # device values, readable after the wait
    # PLE rows delivered through the mailbox, and how long the frame waited for them inside
    # its interval (runtime/ple/delivery.py)
    ple_deliveries: tuple[Delivery, ...] = ()
    ple_wait_ns: int = 0
    ple_inside: tuple[Delivery, ...] = ()  # rows the program itself asked for (drafts, ...)
