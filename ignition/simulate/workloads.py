"""Workloads: who arrives when, with how long a prompt and output, and how drafts fare
(:func:`load_trace`, :func:`poisson`, :func:`conversations`, :class:`AcceptanceModel`).
Load is a rate scale: 2.0 replays a window's arrivals twice as fast. A malformed trace
or parameter fails with one line naming the file, column or value."""

from __future__ import annotations

import csv
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from ignition.helios import HEAD_DRAFTS, DraftSource
from ignition.simulate.acceptance import COPIES

TRACE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
DEFAULT_ACCEPTANCE = (0.8, 0.7, 0.6, 0.5, 0.4)


class WorkloadError(ValueError):
    """A workload that cannot be built; the message names the file, column or value."""


@dataclass(frozen=True)
class SimRequest:
    """One simulated request. ``acceptance`` lists the conditional probability that draft
    position d is accepted given the earlier ones (positions past it are rejected)."""

    arrival_ms: float
    prompt_tokens: int
    output_tokens: int
    acceptance: tuple[float, ...] = ()
    message_endpoints: tuple[int, ...] = ()
    acceptance_prior: tuple[float, ...] = ()
    conversation: int = -1
    turn: int = 0
    cached_prefix: int = 0  # prompt tokens a retaining server still holds from earlier turns
    task: str = ""  # acceptance.TASKS name, when acceptance was drawn from a task
    round_sigma: float = 0.0  # logit sd of a speculative round's acceptance around the request's
    proposal_source: DraftSource = HEAD_DRAFTS  # Helios's source for it: the task's
    # Helios chooses the source per round among these (RequestSpec.proposal_choices).
    proposal_choices: tuple[DraftSource, ...] = ()
    # Copies of its context (acceptance.CopyModel): the probability a round finds one and
    # a found copy's conditionals; ``acceptance`` is then the MTP head's on it.
    copy_found: float = 0.0
    copy_acceptance: tuple[float, ...] = ()

    @property
    def copies(self) -> bool:
        """Whether its rounds may verify copies: the host finds each round's copy after the
        tokens before it, and Helios is told its length (0: none found)."""
        uses = self.proposal_source == COPIES or COPIES in self.proposal_choices
        return uses and self.copy_found > 0


@dataclass(frozen=True)
class AcceptanceModel:
    """Per-position conditional acceptance; ``spread`` scales each request's vector by a
    lognormal factor (clipped to [0, 1]) so requests differ as real prompts do."""

    conditional: tuple[float, ...] = DEFAULT_ACCEPTANCE
    spread: float = 0.0

    def __post_init__(self) -> None:
        for i, p in enumerate(self.conditional):
            if not 0.0 <= p <= 1.0:
                raise WorkloadError(f"acceptance[{i}] = {p!r}: expected a probability")
        if self.spread < 0:
            raise WorkloadError(f"acceptance spread = {self.spread!r}: must be nonnegative")

    def draw(self, rng: random.Random) -> tuple[float, ...]:
        if self.spread == 0:
            return self.conditional
        factor = math.exp(rng.gauss(0.0, self.spread))
        return tuple(min(1.0, p * factor) for p in self.conditional)

    @staticmethod
    def parse(text: str) -> AcceptanceModel:
        """``0.8,0.7,0.6`` (comma-separated conditional probabilities)."""
        try:
            values = tuple(float(v) for v in text.split(",") if v.strip())
        except ValueError:
            raise WorkloadError(f"acceptance {text!r}: expected comma-separated numbers") from None
        return AcceptanceModel(values)


def with_acceptance(
    requests: Sequence[SimRequest], model: AcceptanceModel, seed: int = 0
) -> list[SimRequest]:
    rng = random.Random(seed)
    return [replace(r, acceptance=model.draw(rng)) for r in requests]


def with_tasks(
    requests: Sequence[SimRequest], mix: Mapping[str, float], seed: int = 0
) -> list[SimRequest]:
    """Each request gets a task drawn from ``mix`` and its acceptance drawn from the task
    (``acceptance.py``): per-request level, per-position decay, per-round spread."""
    from ignition.simulate.acceptance import TASKS, choose_task

    rng = random.Random(seed)
    out = []
    for r in requests:
        task = choose_task(mix, rng)
        copy: dict = {}
        if task.copy is None:
            acceptance = task.draw(rng)
        else:  # its copies', and the MTP head's acceptance on it
            copy = {
                "copy_found": task.copy.found,
                "copy_acceptance": task.copy.draw(rng, task.spread),
            }
            acceptance = (TASKS[task.learned] if task.learned else task).draw(rng)
        out.append(
            replace(
                r,
                acceptance=acceptance,
                task=task.name,
                round_sigma=task.round_sigma,
                proposal_source=task.proposal_source,
                **copy,
            )
        )
    return out


def _timestamp(text: str, where: str) -> float:
    """Seconds since the epoch from the trace's ``YYYY-MM-DD HH:MM:SS.fffffff``."""
    head, _, frac = text.strip().partition(".")
    try:
        whole = datetime.strptime(head, "%Y-%m-%d %H:%M:%S").timestamp()
    except ValueError:
        try:
            return float(text)
        except ValueError:
            raise WorkloadError(f"{where}: TIMESTAMP = {text!r}: not a timestamp") from None
    return whole + (float(f"0.{frac}") if frac else 0.0)


def _count(text: str, where: str, column: str) -> int:
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise WorkloadError(f"{where}: {column} = {text!r}: expected an integer") from None
    if value < 0:
        raise WorkloadError(f"{where}: {column} = {value}: must be nonnegative")
    return value


def load_trace(
    path: str | Path,
    *,
    start: int = 0,
    count: int | None = None,
    rate_scale: float = 1.0,
    max_prompt: int | None = None,
    max_output: int | None = None,
) -> list[SimRequest]:
    """Rows ``start .. start + count`` of a trace; arrivals relative to the first row.

    Zero-length prompts or outputs become one token (a request always has both).
    """
    path = Path(path)
    if not math.isfinite(rate_scale) or rate_scale <= 0:
        raise WorkloadError(f"rate = {rate_scale!r}: must be a positive load scale")
    if start < 0 or (count is not None and count < 1):
        raise WorkloadError(f"{path}: window start {start}, count {count}: invalid")
    for name, cap in (("max_prompt", max_prompt), ("max_output", max_output)):
        if cap is not None and cap < 1:
            raise WorkloadError(f"{name} = {cap}: must be at least 1")
    try:
        f = path.open(newline="")
    except FileNotFoundError:
        raise WorkloadError(f"{path}: no such trace file") from None
    with f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        for column in TRACE_COLUMNS:
            if column not in header:
                raise WorkloadError(f"{path}: missing column {column!r}")
        out: list[SimRequest] = []
        origin: float | None = None
        for i, row in enumerate(reader):
            if i < start:
                continue
            if count is not None and len(out) >= count:
                break
            where = f"{path}:{i + 2}"
            t = _timestamp(row["TIMESTAMP"], where)
            origin = t if origin is None else origin
            prompt = max(1, _count(row["ContextTokens"], where, "ContextTokens"))
            output = max(1, _count(row["GeneratedTokens"], where, "GeneratedTokens"))
            if max_prompt is not None:
                prompt = min(prompt, max_prompt)
            if max_output is not None:
                output = min(output, max_output)
            out.append(SimRequest((t - origin) * 1e3 / rate_scale, prompt, output))
    if not out:
        raise WorkloadError(f"{path}: no rows in window start {start}, count {count}")
    return out


def poisson(
    rate_per_s: float,
    count: int,
    *,
    prompt_tokens: Sequence[int] = (1024,),
    output_tokens: Sequence[int] = (128,),
    seed: int = 0,
) -> list[SimRequest]:
    """Poisson arrivals; each request's lengths are drawn from the given pools."""
    if not math.isfinite(rate_per_s) or rate_per_s <= 0:
        raise WorkloadError(f"rate = {rate_per_s!r}: must be a positive request rate")
    if count < 1 or not prompt_tokens or not output_tokens:
        raise WorkloadError("poisson: needs count >= 1 and nonempty length pools")
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(count):
        t += rng.expovariate(rate_per_s) * 1e3
        out.append(SimRequest(t, rng.choice(prompt_tokens), rng.choice(output_tokens)))
    return out


def conversations(
    num_conversations: int,
    turns: int,
    *,
    rate_per_s: float = 1.0,
    first_prompt: int = 1024,
    turn_prompt: int = 128,
    output_tokens: int = 128,
    think_ms: float = 5000.0,
    seed: int = 0,
) -> list[SimRequest]:
    """Conversations starting as a Poisson process; turn k re-sends the whole history.

    Turn arrivals are open-loop (start + k * think time, jittered), so a slow server
    does not slow its users down. ``cached_prefix`` is the history before this turn,
    what a server that retains the conversation's state would not recompute.
    """
    if num_conversations < 1 or turns < 1:
        raise WorkloadError("conversations: needs at least one conversation and one turn")
    if not math.isfinite(rate_per_s) or rate_per_s <= 0:
        raise WorkloadError(f"rate = {rate_per_s!r}: must be a positive conversation rate")
    rng = random.Random(seed)
    out, t = [], 0.0
    for c in range(num_conversations):
        t += rng.expovariate(rate_per_s) * 1e3
        history, arrival = 0, t
        for k in range(turns):
            new = first_prompt if k == 0 else turn_prompt
            prompt = history + new
            out.append(
                SimRequest(
                    arrival, prompt, output_tokens, conversation=c, turn=k, cached_prefix=history
                )
            )
            history = prompt + output_tokens
            arrival += think_ms * (0.5 + rng.random())
    out.sort(key=lambda r: r.arrival_ms)
    return out


def load_units(requests: Sequence[SimRequest]) -> float:
    """Offered requests per second of a workload (for reports)."""
    if len(requests) < 2:
        return 0.0
    span = max(r.arrival_ms for r in requests) - min(r.arrival_ms for r in requests)
    return (len(requests) - 1) / (span / 1e3) if span > 0 else math.inf
