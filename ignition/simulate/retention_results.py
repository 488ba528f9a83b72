"""What a multi-turn retention run measured, its JSON and its table row."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RetentionRun:
    snapshot_rows: int
    turns: int
    first_turn_ttft_ms: tuple[float, ...]
    later_turn_ttft_ms: tuple[float, ...]
    later_prompt_tokens: int
    later_history_tokens: int
    later_cached_tokens: int
    prefill_tokens: int
    restores: int
    evictions: int
    makespan_ms: float
    # every turn's mean time per output token after its first: what the decoders paid
    tpot_ms: tuple[float, ...] = ()
    policy: str = "helios"  # a baseline's run retains nothing (``conversation.py``)
    outputs: dict[str, tuple[int, ...]] = field(repr=False, compare=False, default_factory=dict)

    @property
    def cached_share(self) -> float:
        """Cached tokens over the later turns' whole prompts."""
        return self.later_cached_tokens / max(1, self.later_prompt_tokens)

    @property
    def history_share(self) -> float:
        """Cached tokens over what earlier turns had sent (the most a cache could hold)."""
        return self.later_cached_tokens / max(1, self.later_history_tokens)

    def to_json(self) -> dict:
        later = self.later_turn_ttft_ms
        return {
            "policy": self.policy,
            "snapshot_rows": self.snapshot_rows,
            "turns": self.turns,
            "first_turn_ttft_mean_ms": _mean(self.first_turn_ttft_ms),
            "later_turn_ttft_mean_ms": _mean(later),
            "later_turn_ttft_p50_ms": _quantile(later, 0.5),
            "later_turn_ttft_p90_ms": _quantile(later, 0.9),
            "cached_share_of_prompt": self.cached_share,
            "cached_share_of_history": self.history_share,
            "prefill_tokens": self.prefill_tokens,
            "restores": self.restores,
            "evictions": self.evictions,
            "makespan_ms": self.makespan_ms,
            "tpot_mean_ms": _mean(self.tpot_ms),
            "tpot_p90_ms": _quantile(self.tpot_ms, 0.9),
        }


def _mean(xs: Sequence[float]) -> float:
    return statistics.fmean(xs) if xs else math.nan


def _quantile(xs: Sequence[float], q: float) -> float:
    if not xs:
        return math.nan
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def retention_table(runs: Sequence[RetentionRun], title: str):
    from rich.table import Table

    table = Table(title=title)
    columns = (
        "policy",
        "snapshot rows",
        "turn-1 TTFT mean",
        "later TTFT mean",
        "p50",
        "p90",
        "cached / prompt",
        "cached / history",
        "prefill tokens",
        "restores",
        "evictions",
        "TPOT mean",
        "makespan s",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "policy" else "right")
    for run in runs:
        j = run.to_json()
        retains = run.policy.startswith("helios")
        rows = str(run.snapshot_rows) + (" (off)" if run.snapshot_rows == 0 else "")
        table.add_row(
            run.policy,
            rows if retains else "- (none)",
            f"{j['first_turn_ttft_mean_ms']:.1f}",
            f"{j['later_turn_ttft_mean_ms']:.1f}",
            f"{j['later_turn_ttft_p50_ms']:.1f}",
            f"{j['later_turn_ttft_p90_ms']:.1f}",
            f"{run.cached_share:.1%}",
            f"{run.history_share:.1%}",
            str(run.prefill_tokens),
            str(run.restores),
            str(run.evictions),
            f"{j['tpot_mean_ms']:.2f}",
            f"{run.makespan_ms / 1e3:.2f}",
        )
    return table
