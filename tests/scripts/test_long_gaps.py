"""``scripts/scheduling_sim/long_gaps.py``: the gaps past a bound and the frames behind them."""

from __future__ import annotations

import pytest

from ignition.simulate.results import ExecutionRecord, RequestRecord, RunResult
from scripts.scheduling_sim.long_gaps import frames_behind, long_gaps, main


def _run() -> RunResult:
    """Two decoders delivering every 60 ms until one 90 ms frame delays both; a prompt
    frame overlapping the gap is not a generation frame behind it."""
    times = [0.0, 60.0, 120.0, 210.0, 270.0]
    requests = [
        RequestRecord(i, 0.0, 8, 5, deliveries=[(t, 1) for t in times]) for i in range(2)
    ]
    executions = [
        ExecutionRecord(0.0, 60.0, "decode", "b2-w1", decoders=2),
        ExecutionRecord(60.0, 120.0, "decode", "b2-w1", decoders=2),
        ExecutionRecord(120.0, 210.0, "speculative", "b2-w3", "acceptance_learning", decoders=2),
        ExecutionRecord(130.0, 140.0, "prefill", "p", prompt_tokens=64),
        ExecutionRecord(210.0, 270.0, "decode", "b2-w1", decoders=2),
    ]
    return RunResult("x", requests, executions, 270.0)


def test_only_gaps_past_the_bound_count_and_only_generation_frames_are_behind_them():
    run = _run()
    gaps = long_gaps(run, 75.0)
    assert gaps == [(120.0, 210.0), (120.0, 210.0)]
    assert dict(frames_behind(run, gaps)) == {
        (120.0, "b2-w3", "acceptance_learning", 2): 2
    }
    assert long_gaps(run, 90.0) == []


def test_a_bound_that_is_not_positive_is_refused():
    with pytest.raises(SystemExit):
        main(["helios", "--over", "0"])
