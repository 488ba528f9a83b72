"""What users saw and what the device spent, from one :class:`RunResult` (each measure:
docs/simulate.md, "metrics.py"). A request that never produced output counts as
infinitely late, so a truncated run cannot pass a TTFT guard by omission."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from ignition.simulate.results import RunResult

QUANTILES = (0.5, 0.9, 0.99)


def percentile(samples: Sequence[float], q: float) -> float:
    """Nearest-rank percentile; NaN for no samples."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class Percentiles:
    p50: float
    p90: float
    p99: float

    @staticmethod
    def of(samples: Sequence[float]) -> Percentiles:
        return Percentiles(*(percentile(samples, q) for q in QUANTILES))


@dataclass
class Metrics:
    policy: str
    requests: int
    finished: int
    output_tokens_per_s: float
    ttft_ms: Percentiles
    tbt_ms: Percentiles
    tpot_ms: Percentiles
    device_ms_by_class: dict[str, float] = field(default_factory=dict)
    device_ms_by_kind: dict[str, float] = field(default_factory=dict)
    aborted: bool = False

    def to_json(self) -> dict:
        """Plain JSON: infinite or undefined percentiles become null."""

        def clean(value):
            if isinstance(value, dict):
                return {k: clean(v) for k, v in value.items()}
            if isinstance(value, float) and not math.isfinite(value):
                return None
            return value

        return clean(asdict(self))


def metrics_from_json(data: dict) -> Metrics:
    """Inverse of ``Metrics.to_json`` (null percentiles read back as infinite)."""

    def pct(d: dict) -> Percentiles:
        return Percentiles(*(math.inf if d[k] is None else d[k] for k in ("p50", "p90", "p99")))

    return Metrics(
        policy=data["policy"],
        requests=data["requests"],
        finished=data["finished"],
        output_tokens_per_s=data["output_tokens_per_s"],
        ttft_ms=pct(data["ttft_ms"]),
        tbt_ms=pct(data["tbt_ms"]),
        tpot_ms=pct(data["tpot_ms"]),
        device_ms_by_class=data["device_ms_by_class"],
        device_ms_by_kind=data["device_ms_by_kind"],
        aborted=data["aborted"],
    )


def ttft_samples(run: RunResult) -> list[float]:
    return [
        (r.first_output_ms - r.arrival_ms) if r.first_output_ms is not None else math.inf
        for r in run.requests
    ]


def tbt_samples(run: RunResult) -> list[float]:
    out: list[float] = []
    for r in run.requests:
        times = [t for t, _ in r.deliveries]
        out.extend(b - a for a, b in itertools.pairwise(times))
    return out


def tpot_samples(run: RunResult) -> list[float]:
    out = []
    for r in run.requests:
        if r.finish_ms is not None and r.first_output_ms is not None and r.output_tokens > 1:
            out.append((r.finish_ms - r.first_output_ms) / (r.output_tokens - 1))
    return out


def device_time(run: RunResult, by: str) -> dict[str, float]:
    totals: dict[str, float] = {}
    for e in run.executions:
        key = e.execution_class if by == "class" else e.kind
        totals[key] = totals.get(key, 0.0) + e.device_ms
    return dict(sorted(totals.items()))


def measure(run: RunResult) -> Metrics:
    start = min((r.arrival_ms for r in run.requests), default=0.0)
    last = max((t for r in run.requests for t, _ in r.deliveries), default=start)
    span_s = max(last - start, 1e-9) / 1e3
    return Metrics(
        policy=run.policy,
        requests=len(run.requests),
        finished=run.finished,
        output_tokens_per_s=run.output_tokens / span_s,
        ttft_ms=Percentiles.of(ttft_samples(run)),
        tbt_ms=Percentiles.of(tbt_samples(run)),
        tpot_ms=Percentiles.of(tpot_samples(run)),
        device_ms_by_class=device_time(run, "class"),
        device_ms_by_kind=device_time(run, "kind"),
        aborted=bool(run.info.get("aborted", False)),
    )
