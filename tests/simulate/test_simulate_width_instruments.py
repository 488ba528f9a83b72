"""Issue 12, the instruments behind "adaptive speculation never below the best fixed width":
the per-graph cohort table, the acceptance-estimate watch and the width comparison page."""

from __future__ import annotations

import math

from ignition.simulate.results import ExecutionRecord, RunResult
from scripts.scheduling_sim.acceptance import Stretch, table
from scripts.scheduling_sim.frame_mix import graph_table
from scripts.scheduling_sim.widths import MATRIX, fixed_width_section


def _frame(graph: str, decoders: int, rows: int, ms: float) -> ExecutionRecord:
    return ExecutionRecord(
        start_ms=0.0,
        end_ms=ms,
        kind="speculative",
        graph=graph,
        execution_class="ordinary",
        rows=decoders,
        tokens=rows,
        prompt_tokens=0,
        decoders=decoders,
        width=4,
        idle_decoders=0,
    )


def test_graph_table_gives_each_speculative_graphs_cohort_and_rows_per_decoder():
    run = RunResult(
        policy="helios",
        requests=[],
        executions=[
            _frame("ragged", 28, 128, 52.0),
            _frame("ragged", 30, 128, 53.0),
            _frame("rect", 32, 128, 52.0),
        ],
        end_ms=200.0,
        slots=32,
    )
    lines = graph_table(run)
    ragged = next(line for line in lines if line.strip().startswith("ragged"))
    assert ragged.split()[1:4] == ["2", "29.0", "4.41"]  # 256 rows over 58 decoders
    assert lines.index(ragged) == 1  # most used first


def test_the_acceptance_table_shows_truth_prior_live_estimate_and_observations_per_depth():
    stretch = Stretch(20.0, prior=[0.8, 0.5], live=[0.79, 0.55], observations=[100, 40])
    stretch.rounds, stretch.rows = 50, 150
    lines = table([0.8, 0.56], [stretch])
    assert "0.560" in lines[1]
    assert lines[-1].split() == ["20s", "3.00", "0.800/0.790/", "100", "0.500/0.550/", "40"]


def _cell(tpot: float, ttft: float, stopped: bool = False) -> dict:
    return {
        "tpot_p50_ms": tpot,
        "ttft_p50_s": 0.1,
        "ttft_p99_s": math.inf if stopped else ttft,
        "tbt_p99_ms": 60.0,
        "rows_per_decoder": 2.0,
        "finished": 10 if stopped else 600,
        "requests": 600,
        "stopped": stopped,
    }


def test_the_width_page_compares_adaptive_with_its_best_finished_fixed_width():
    slots, (load, *_), _families = MATRIX[0]
    cells = {
        "helios": _cell(13.7, 0.83),
        "helios+w2": _cell(12.4, 0.81),
        "helios+w3": _cell(11.0, 0.9, stopped=True),  # a stopped run never ranks best
        "helios+w4": _cell(14.6, 0.79),
    }
    lines = fixed_width_section({str(slots): {str(load): cells}})
    row = next(line for line in lines if line.startswith(f"| {slots} | {load:g} | `helios` |"))
    assert "`helios+w2` | 12.4 | 0.81" in row
    assert any("stopped (10/600)" in line for line in lines)


def test_all_writes_the_committed_side_files_beside_the_page_results_and_prefixed_elsewhere():
    from pathlib import Path

    from scripts.scheduling_sim.capacity_study import side_files

    page = side_files(Path("docs/capacity/results.json"))
    assert page["widths"] == Path("docs/capacity/widths.json")
    assert page["whatifs"] == Path("docs/capacity/whatifs.json")
    assert side_files(Path("/tmp/q.json"))["padding"] == Path("/tmp/q-padding.json")
