"""SLO capacity search: the highest load at which a policy meets p99 TBT and TTFT bounds
(geometric grid up, then bisection; docs/simulate.md, "search.py"). A run passes only
when every request finished."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ignition.simulate.harness import Setup, run_policy
from ignition.simulate.metrics import Metrics, measure
from ignition.simulate.workloads import SimRequest

GRID_FACTOR = 2**0.25
BISECTIONS = 3


class SearchError(ValueError):
    """A malformed SLO or search range; the message names it."""


@dataclass(frozen=True)
class SLO:
    """p99 TBT bound (ms; None: not binding) and p99 TTFT guard (ms)."""

    tbt_p99_ms: float | None
    ttft_p99_ms: float

    @property
    def label(self) -> str:
        tbt = "-" if self.tbt_p99_ms is None else f"{self.tbt_p99_ms:g} ms"
        return f"TBT {tbt} / TTFT {self.ttft_p99_ms / 1e3:g} s"

    def met_by(self, m: Metrics) -> bool:
        if m.aborted or m.finished < m.requests:
            return False
        if not m.ttft_ms.p99 <= self.ttft_p99_ms:
            return False
        return self.tbt_p99_ms is None or m.tbt_ms.p99 <= self.tbt_p99_ms


def parse_slos(text: str) -> list[SLO]:
    """``TBT_MS:TTFT_S`` pairs, comma-separated; ``-`` for a TBT that does not bind."""
    out = []
    for part in text.split(","):
        tbt, sep, ttft = part.strip().partition(":")
        try:
            bound = None if tbt.strip() == "-" else float(tbt)
            guard = float(ttft) * 1e3
        except ValueError:
            raise SearchError(
                f"--slo {part.strip()!r}: expected TBT_MS:TTFT_S, e.g. 100:5"
            ) from None
        if not sep or guard <= 0 or (bound is not None and bound <= 0):
            raise SearchError(f"--slo {part.strip()!r}: expected positive TBT_MS:TTFT_S")
        out.append(SLO(bound, guard))
    return out


@dataclass
class Capacity:
    policy: str
    slo: SLO
    rate: float  # 0.0 when even the lowest rate fails
    metrics: Metrics | None  # at that rate


@dataclass
class Searcher:
    """Runs one policy at rates on demand, caching by rate."""

    policy: str
    workload: Callable[[float], Sequence[SimRequest]]
    setup: Setup
    guard_ms: float | None = None
    on_run: Callable[[str, float], None] | None = None
    cache: dict[float, Metrics] = field(default_factory=dict)

    def at(self, rate: float) -> Metrics:
        key = round(rate, 6)
        if key not in self.cache:
            run = run_policy(self.policy, self.workload(key), self.setup, self.guard_ms)
            self.cache[key] = measure(run)
            if self.on_run is not None:
                self.on_run(self.policy, key)
        return self.cache[key]

    def capacity(
        self,
        slo: SLO,
        lo: float = 0.125,
        hi: float = 8.0,
        factor: float = GRID_FACTOR,
        bisections: int = BISECTIONS,
    ) -> Capacity:
        if not 0 < lo < hi:
            raise SearchError(f"capacity search range {lo}..{hi}: needs 0 < lo < hi")
        if not factor > 1 or bisections < 0:
            raise SearchError(
                f"capacity grid factor {factor}, {bisections} bisections: "
                "needs factor > 1 and bisections >= 0"
            )
        grid = [lo * factor**k for k in range(int(math.log(hi / lo, factor)) + 1)]
        passing, failing = None, None
        for rate in grid:
            if slo.met_by(self.at(rate)):
                passing = rate
            else:
                failing = rate
                break
        if passing is None:
            return Capacity(self.policy, slo, 0.0, None)
        if failing is not None:
            a, b = passing, failing
            for _ in range(bisections):
                mid = math.sqrt(a * b)
                if slo.met_by(self.at(mid)):
                    a = mid
                else:
                    b = mid
            passing = a
        return Capacity(self.policy, slo, round(passing, 6), self.at(passing))


def search(
    policies: Sequence[str],
    slos: Sequence[SLO],
    workload: Callable[[float], Sequence[SimRequest]],
    setup: Setup,
    *,
    lo: float = 0.125,
    hi: float = 8.0,
    on_run: Callable[[str, float], None] | None = None,
    factor: float = GRID_FACTOR,
    bisections: int = BISECTIONS,
) -> tuple[list[Capacity], dict[str, dict[float, Metrics]]]:
    """Capacities per policy and SLO, and every run made (for load curves). The grid
    resolution after the bisections is factor^(1 / 2^bisections)."""
    guard = max(s.ttft_p99_ms for s in slos)
    out, runs = [], {}
    for policy in policies:
        searcher = Searcher(policy, workload, setup, guard, on_run)
        for slo in slos:
            out.append(searcher.capacity(slo, lo, hi, factor, bisections))
        runs[policy] = dict(sorted(searcher.cache.items()))
    return out, runs
