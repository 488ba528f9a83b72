"""Acceptance as it varies (by task, request, position, round) and the drafter's
confidence. Conditionals p_d = first * decay^(d-1) clipped to [0, 1]; a round's true
q_d and confidence c_d = sigmoid(logit q_d + noise) (``CONFIDENCE``): Helios's device
allocation and the adaptive baselines read c, the acceptance drawn is q's. Each task's
published figure: docs/simulate.md, "acceptance.py"."""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ignition.helios import HEAD_DRAFTS, DraftSource

MAX_DEPTH = 8
# Copies of a request's context (prompt lookup): the runtime's copy source, as Helios knows it
COPIES = DraftSource("ngram")


class AcceptanceError(ValueError):
    """An unknown task, mix or confidence knob; the message names it."""


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


@dataclass(frozen=True)
class CopyModel:
    """Copies of a request's context as its proposal source (prompt lookup): a round finds
    a copy with probability ``found`` (else it has no copied drafts); a found copy's
    positions are right with conditionals ``first * decay^(d-1)``, shifted per request
    on the logit scale as its task's are. A found copy is ``MAX_DEPTH`` tokens long."""

    found: float
    first: float
    decay: float

    def draw(self, rng: random.Random, spread: float, depth: int = MAX_DEPTH) -> tuple[float, ...]:
        shift = rng.gauss(0.0, spread) if spread else 0.0
        return tuple(
            _sigmoid(_logit(min(1.0, self.first * self.decay**d)) + shift) for d in range(depth)
        )


@dataclass(frozen=True)
class Task:
    """A task's acceptance: conditional at position 1, decay per position, the spread of
    requests around it and of rounds around a request (logit sd)."""

    name: str
    first: float
    decay: float
    spread: float
    round_sigma: float
    source: str
    # Helios's RequestSpec.proposal_source for the task's requests: the learned head's
    # drafts or COPIES (copies of the context; the same programs verify them).
    proposal_source: DraftSource = HEAD_DRAFTS
    # A task whose outputs repeat their context: the copy source's rounds (found or not),
    # and the task whose MTP-head acceptance its requests have when a round uses the head.
    copy: CopyModel | None = None
    learned: str = ""

    def conditional(self, depth: int = MAX_DEPTH) -> tuple[float, ...]:
        return tuple(min(1.0, self.first * self.decay**d) for d in range(depth))

    def draw(self, rng: random.Random, depth: int = MAX_DEPTH) -> tuple[float, ...]:
        """One request's conditional vector: the task's, shifted on the logit scale."""
        shift = rng.gauss(0.0, self.spread) if self.spread else 0.0
        return tuple(_sigmoid(_logit(p) + shift) for p in self.conditional(depth))


TASKS: dict[str, Task] = {
    t.name: t
    for t in (
        Task("random", 0.59, 0.95, 0.1, 0.2, "vLLM recipe, random tokens: 36.5% of K = 3"),
        Task("chat", 0.76, 0.848, 0.5, 0.6, "Qwen3.8-27B MTP: 76% -> 24% over 8 positions"),
        Task("code", 0.90, 0.97, 0.4, 0.6, "released MTP head: ~0.9 per position, ~4 at k = 4"),
        Task("math", 0.93, 0.96, 0.3, 0.5, "GSM8K accept length 5.11 at K = 7 (vLLM PR 52228)"),
        Task(
            "edit",
            0.69,
            0.97,
            0.4,
            0.6,
            "prompt lookup, code suite: copies at 74% of positions, 93% right",
            proposal_source=COPIES,
            copy=CopyModel(0.74, 0.93, 0.97),
            learned="code",
        ),
    )
}

# The Azure traces carry no task labels; these mixes are assigned (docs/capacity.md).
TRACE_MIXES: dict[str, dict[str, float]] = {
    "conv": {"chat": 0.7, "math": 0.15, "code": 0.1, "random": 0.05},
    "code": {"code": 0.8, "chat": 0.2},
    "random": {"random": 1.0},
}

# Logit-scale noise of the drafter's confidence around the round's true acceptance.
CONFIDENCE: dict[str, float] = {"perfect": 0.0, "eagle2": 0.7, "weak": 2.0}


def parse_mix(text: str) -> dict[str, float]:
    """A named mix (``TRACE_MIXES``) or ``task:weight,...``; weights are normalised."""
    if text in TRACE_MIXES:
        return dict(TRACE_MIXES[text])
    mix: dict[str, float] = {}
    for part in text.split(","):
        name, _, weight = part.strip().partition(":")
        if name not in TASKS:
            known = ", ".join([*TRACE_MIXES, *TASKS])
            raise AcceptanceError(f"task mix {text!r}: unknown task {name!r} (known: {known})")
        try:
            w = float(weight) if weight else 1.0
        except ValueError:
            raise AcceptanceError(f"task mix {text!r}: weight {weight!r} is not a number") from None
        if not math.isfinite(w) or w < 0:
            raise AcceptanceError(f"task mix {text!r}: weight {w!r} must be nonnegative")
        mix[name] = mix.get(name, 0.0) + w
    total = sum(mix.values())
    if total <= 0:
        raise AcceptanceError(f"task mix {text!r}: weights sum to zero")
    return {k: v / total for k, v in mix.items()}


def confidence_noise(knob: str) -> float:
    if knob not in CONFIDENCE:
        known = ", ".join(CONFIDENCE)
        raise AcceptanceError(f"confidence {knob!r}: unknown calibration (known: {known})")
    return CONFIDENCE[knob]


def choose_task(mix: Mapping[str, float], rng: random.Random) -> Task:
    x, acc = rng.random(), 0.0
    for name, w in mix.items():
        acc += w
        if x < acc:
            return TASKS[name]
    return TASKS[next(reversed(list(mix)))]


class Round:
    """One speculative round of one request: true conditionals and the drafter's signal.
    ``draw_round`` makes every random draw at once (the random stream must not depend on
    what is read later); the sigmoids are computed only when read."""

    __slots__ = ("_conditional", "_logits", "_noises", "_shock", "_signal")

    def __init__(
        self, conditional: tuple[float, ...] | None, signal: tuple[float, ...] | None = None
    ) -> None:
        self._conditional = conditional
        self._signal = signal if signal is not None else conditional
        self._logits: tuple[float, ...] = ()
        self._shock = 0.0
        self._noises: tuple[float, ...] | None = None

    @classmethod
    def drawn(
        cls, logits: tuple[float, ...], shock: float, noises: tuple[float, ...] | None
    ) -> Round:
        """q_d = sigmoid(logit p_d + shock); c_d = sigmoid(logit q_d + noise_d), or q_d
        itself without noise (``noises`` None)."""
        r = cls(None)
        r._logits, r._shock, r._noises = logits, shock, noises
        return r

    @property
    def conditional(self) -> tuple[float, ...]:
        if self._conditional is None:
            shock = self._shock
            self._conditional = tuple(1 / (1 + math.exp(-(x + shock))) for x in self._logits)
        return self._conditional

    @property
    def signal(self) -> tuple[float, ...]:
        if self._signal is None:
            if self._noises is None:
                self._signal = self.conditional
            else:
                # _sigmoid(_logit(q) + noise), inlined: the same operations
                self._signal = tuple(
                    1 / (1 + math.exp(-(math.log(c / (1 - c)) + n)))
                    for c, n in zip(
                        (min(max(q, 1e-6), 1 - 1e-6) for q in self.conditional),
                        self._noises,
                        strict=True,
                    )
                )
        return self._signal

    def survival(self) -> tuple[float, ...]:
        """The signal's prefix survival s_d = c_1 ... c_d (what width choices rank by)."""
        out, p = [], 1.0
        for c in self.signal:
            p *= c
            out.append(p)
        return tuple(out)

    def accepted(self, drafts: int, rng: random.Random) -> int:
        if self._conditional is None:  # only the positions verified, as conditional has them
            shock = self._shock
            n = 0
            for x in self._logits[:drafts]:
                if rng.random() >= 1 / (1 + math.exp(-(x + shock))):
                    break
                n += 1
            return n
        n = 0
        for q in self._conditional[:drafts]:
            if rng.random() >= q:
                break
            n += 1
        return n


def _gauss_draws(rng: random.Random, sigma: float, n: int) -> tuple[float, ...]:
    """``n`` draws of ``rng.gauss(0.0, sigma)``: the same values and the same generator
    state after, without a method call per draw. CPython's Box-Muller step, spare value in
    ``gauss_next``; ``_GAUSS_MATCHES`` checks it against ``random.gauss`` at import, and
    ``gauss_draws`` falls back to it on any difference."""
    if n <= 0:
        return ()
    draw = rng.random
    out = []
    spare = rng.gauss_next
    rng.gauss_next = None
    if spare is not None:
        out.append(0.0 + spare * sigma)
        n -= 1
    while n > 0:
        x2pi = draw() * _TWO_PI
        g2rad = math.sqrt(-2.0 * math.log(1.0 - draw()))
        out.append(0.0 + math.cos(x2pi) * g2rad * sigma)
        spare = math.sin(x2pi) * g2rad
        if n == 1:
            rng.gauss_next = spare  # the next draw's, as random.gauss keeps it
            break
        out.append(0.0 + spare * sigma)
        n -= 2
    return tuple(out)


_TWO_PI = 2.0 * math.pi


def _gauss_matches() -> bool:
    """Whether ``_gauss_draws`` reproduces this Python's ``random.gauss`` exactly,
    interleaved with single calls so the spare value's hand-over is checked too."""
    ours, theirs = random.Random(29), random.Random(29)
    for n, sigma in ((1, 0.7), (8, 0.7), (3, 2.0), (0, 1.0), (5, 0.5), (2, 1.0)):
        if ours.gauss(0.0, 0.3) != theirs.gauss(0.0, 0.3):
            return False
        if _gauss_draws(ours, sigma, n) != tuple(theirs.gauss(0.0, sigma) for _ in range(n)):
            return False
    return ours.getstate() == theirs.getstate()


_GAUSS_MATCHES = _gauss_matches()


def gauss_draws(rng: random.Random, sigma: float, n: int) -> tuple[float, ...]:
    """``tuple(rng.gauss(0.0, sigma) for _ in range(n))``, faster where it is the same."""
    if _GAUSS_MATCHES:
        return _gauss_draws(rng, sigma, n)
    return tuple(rng.gauss(0.0, sigma) for _ in range(n))


@functools.lru_cache(maxsize=4096)
def _logits(conditional: tuple[float, ...]) -> tuple[float, ...]:
    """A request's conditionals on the logit scale: the same every round (keyed by value)."""
    return tuple(_logit(p) for p in conditional)


def draw_round(
    conditional: Sequence[float], round_sigma: float, noise: float, rng: random.Random
) -> Round:
    """The round's true conditionals (the request's, moved by one shared logit shock) and
    the drafter's confidence (each position's own logit noise)."""
    shock = rng.gauss(0.0, round_sigma) if round_sigma else 0.0
    logits = _logits(tuple(conditional))
    if noise == 0:
        return Round.drawn(logits, shock, None)
    return Round.drawn(logits, shock, gauss_draws(rng, noise, len(logits)))


def accept_length(conditional: Sequence[float], drafts: int) -> float:
    """Expected tokens per round with ``drafts`` drafts: 1 + sum of prefix survivals."""
    total, p = 1.0, 1.0
    for q in conditional[:drafts]:
        p *= q
        total += p
    return total
