"""Issue 17: rank zero's cost sample is the maximum rank-local device interval, and peer
confidence sidecars must be probabilities; issue 23: the frame's readiness stall is the time
any rank waited for its PLE rows (no process group needed)."""

from __future__ import annotations

import math

import pytest

from ignition.distributed.faults import RankFault
from ignition.distributed.ranks import RankReport, frame_timing, sidecar_problem
from ignition.helios import ExecutionTiming, SchedulerError
from ignition.helios.reports import ConfidenceSidecar
from ignition.runtime.ple.mailbox import Readiness


def test_the_cost_sample_is_the_maximum_of_the_ranks_device_intervals():
    timing = ExecutionTiming.across_ranks((7_000, 9_000), wall_ns=12_000)
    assert timing.device_ns == 9_000
    assert timing.rank_device_ns == (7_000, 9_000)


def test_a_rank_that_measured_nothing_leaves_the_others_maximum():
    assert ExecutionTiming.across_ranks((0, 5_000)).device_ns == 5_000
    assert ExecutionTiming.across_ranks((0, 0)).device_ns == 0  # missing: no observation


def test_a_device_interval_other_than_the_ranks_maximum_is_rejected():
    with pytest.raises(SchedulerError, match="not the maximum"):
        ExecutionTiming(device_ns=7_000, rank_device_ns=(7_000, 9_000))


def sidecar(value: float) -> ConfidenceSidecar:
    return ConfidenceSidecar(planes=(((0.5, value),), ((0.9, 0.8),)))


def test_peer_confidences_need_not_agree_bitwise_but_must_be_probabilities():
    assert sidecar_problem(sidecar(0.25)) is None
    assert sidecar_problem(sidecar(1.0)) is None
    for bad in (math.nan, math.inf, -0.1, 1.5):
        problem = sidecar_problem(sidecar(bad))
        assert problem is not None and "plane 0 row 0 position 1" in problem


def test_a_malformed_rank_fault_plan_is_one_line_naming_the_variable():
    with pytest.raises(ValueError, match="IGNITION_TEST_RANK_FAULT = '1:step:5'"):
        RankFault.parse("1:step:5")


# -- issue 23: the readiness stall of a tensor-parallel frame --------------------------------


def stalled(rank: int, device_ns: int, *windows: tuple[int, int], counts: bool = True):
    readiness = tuple(Readiness(0, ready, needed) for needed, ready in windows)
    return RankReport(rank, device_ns, readiness=readiness, counts_stalls=counts)


def test_a_followers_stall_is_the_frames_though_rank_zero_waited_for_nothing():
    timing = frame_timing(50_000, [stalled(0, 30_000), stalled(1, 40_000, (1_000, 9_000))])
    assert (timing.device_ns, timing.readiness_stall_ns) == (40_000, 8_000)


def test_the_ranks_stalls_aggregate_over_the_maximum_interval_not_per_rank():
    """Rank zero waits before the program, rank one inside it later: both delay the frame,
    and the stall is subtracted from the ranks' maximum interval (Helios), once."""
    reports = [stalled(0, 30_000, (1_000, 4_000)), stalled(1, 31_000, (10_000, 12_000))]
    timing = frame_timing(50_000, reports)
    assert (timing.device_ns, timing.readiness_stall_ns) == (31_000, 5_000)


def test_a_stall_outside_its_ranks_interval_does_not_count():
    reports = [stalled(0, 30_000), stalled(1, 30_000, (1_000, 9_000), counts=False)]
    assert frame_timing(50_000, reports).readiness_stall_ns == 0


def test_the_stall_never_exceeds_the_ranks_maximum_interval():
    reports = [stalled(0, 3_000, (0, 2_000)), stalled(1, 4_000, (5_000, 9_000))]
    assert frame_timing(50_000, reports).readiness_stall_ns == 4_000
