"""PNG plots of a comparison (matplotlib is an optional extra: ``pip install matplotlib``).

- ``latency_vs_load.png``: p50 / p99 TTFT and p99 TBT against load, one line per policy;
- ``graph_mix_<policy>.png``: which graph kind the device ran over time, per policy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ignition.simulate.metrics import Metrics
from ignition.simulate.results import RunResult

KIND_COLOURS = {
    "prefill": "tab:blue",
    "decode": "tab:green",
    "speculative": "tab:orange",
    "mixed": "tab:purple",
}


class PlotError(RuntimeError):
    """Plots were asked for but cannot be drawn (matplotlib missing)."""


def require_matplotlib() -> None:
    """Fails before a long sweep rather than after it."""
    _pyplot()


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotError("--plot needs matplotlib (pip install matplotlib)") from None
    return plt


def latency_vs_load(runs: Mapping[str, Mapping[float, Metrics]], path: Path, title: str) -> Path:
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    panels = (
        ("p50 TTFT (s)", lambda m: m.ttft_ms.p50 / 1e3),
        ("p99 TTFT (s)", lambda m: m.ttft_ms.p99 / 1e3),
        ("p99 TBT (ms)", lambda m: m.tbt_ms.p99),
    )
    colours = plt.get_cmap("tab20").colors
    for ax, (label, value) in zip(axes, panels, strict=True):
        for i, (policy, by_rate) in enumerate(runs.items()):
            points = [(r, value(m)) for r, m in sorted(by_rate.items()) if not m.aborted]
            if points:
                style = "-" if policy.startswith("helios") else "--"
                ax.plot(
                    *zip(*points, strict=True),
                    style,
                    marker="o",
                    markersize=3,
                    color=colours[(2 * i) % 20 + (i // 10) % 2],
                    label=policy,
                )
        ax.set_xlabel("load (rate scale)")
        ax.set_ylabel(label)
        ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def graph_mix(run: RunResult, path: Path, window_ms: float | None = None) -> Path:
    """Executions as coloured spans on one row per kind (the first ``window_ms``)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(12, 2.6))
    kinds = list(KIND_COLOURS)
    end = window_ms if window_ms is not None else run.end_ms
    for e in run.executions:
        if e.start_ms > end:
            break
        row = kinds.index(e.kind) if e.kind in kinds else len(kinds)
        ax.broken_barh(
            [(e.start_ms / 1e3, e.device_ms / 1e3)],
            (row - 0.4, 0.8),
            color=KIND_COLOURS.get(e.kind, "grey"),
        )
    ax.set_yticks(range(len(kinds)), kinds)
    ax.set_xlabel("simulated time (s)")
    ax.set_title(f"graph mix: {run.policy}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_plots(
    directory: str | Path,
    runs: Mapping[str, Mapping[float, Metrics]],
    timelines: Sequence[RunResult],
    title: str,
) -> list[Path]:
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths = [latency_vs_load(runs, out / "latency_vs_load.png", title)]
    for run in timelines:
        safe = run.policy.replace("/", "_")
        paths.append(graph_mix(run, out / f"graph_mix_{safe}.png", window_ms=20_000))
    return paths
