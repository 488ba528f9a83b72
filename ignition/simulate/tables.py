"""The tables every ``ignition simulate`` workload of requests prints: latency
percentiles and tokens/s per policy and load, device time per graph kind and execution
class, and SLO capacities with each policy's ratio to Helios (rich tables)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ignition.simulate.baselines import HELIOS
from ignition.simulate.metrics import Metrics
from ignition.simulate.search import SLO, Capacity


def ms_cell(x: float) -> str:
    if math.isinf(x):
        return "inf"
    if math.isnan(x):
        return "-"
    return f"{x / 1e3:.2f} s" if x >= 1000 else f"{x:.1f}"


def metrics_table(rows: Sequence[tuple[str, Metrics]], title: str):
    from rich.table import Table

    table = Table(title=title)
    for column in (
        "policy",
        "load",
        "out tok/s",
        "TTFT p50",
        "p90",
        "p99",
        "TBT p50",
        "p90",
        "p99",
        "TPOT p50",
        "p99",
    ):
        table.add_column(column, justify="left" if column in ("policy",) else "right")
    for load, m in rows:
        table.add_row(
            m.policy + (" (stopped)" if m.aborted else ""),
            load,
            f"{m.output_tokens_per_s:.0f}",
            *(ms_cell(v) for v in (m.ttft_ms.p50, m.ttft_ms.p90, m.ttft_ms.p99)),
            *(ms_cell(v) for v in (m.tbt_ms.p50, m.tbt_ms.p90, m.tbt_ms.p99)),
            ms_cell(m.tpot_ms.p50),
            ms_cell(m.tpot_ms.p99),
        )
    return table


def device_table(rows: Sequence[tuple[str, Metrics]], title: str):
    """Device seconds per graph kind and per execution class."""
    from rich.table import Table

    kinds = sorted({k for _, m in rows for k in m.device_ms_by_kind})
    classes = sorted({k for _, m in rows for k in m.device_ms_by_class})
    table = Table(title=title)
    table.add_column("policy")
    table.add_column("load", justify="right")
    for k in kinds:
        table.add_column(f"{k} s", justify="right")
    for k in classes:
        table.add_column(f"class {k} s", justify="right")
    for load, m in rows:
        table.add_row(
            m.policy,
            load,
            *(f"{m.device_ms_by_kind.get(k, 0.0) / 1e3:.1f}" for k in kinds),
            *(f"{m.device_ms_by_class.get(k, 0.0) / 1e3:.1f}" for k in classes),
        )
    return table


def capacity_table(capacities: Sequence[Capacity], slos: Sequence[SLO], title: str):
    from rich.table import Table

    table = Table(title=title)
    table.add_column("policy")
    for slo in slos:
        table.add_column(slo.label, justify="right")
        table.add_column("Helios ratio", justify="right")
    by = {(c.policy, c.slo): c.rate for c in capacities}
    for policy in dict.fromkeys(c.policy for c in capacities):
        cells = []
        for slo in slos:
            rate, helios = by[(policy, slo)], by.get((HELIOS, slo))
            cells.append(f"{rate:.3f}")
            cells.append("-" if helios is None or rate == 0 else f"{helios / rate:.2f}x")
        table.add_row(policy, *cells)
    return table
