"""The routing policy as a pure function over typed replica reports (no Ray)."""

from __future__ import annotations

from collections import Counter

import pytest

from ignition.replicas.reports import ReplicaReport
from ignition.replicas.routing import (
    AffinityRouting,
    NoReplicaError,
    RoundRobinRouting,
    Routed,
    routing_policy,
)


def report(name: str, cached: int = 0, running: int = 0, waiting: int = 0, **kw) -> ReplicaReport:
    fields = dict(slots_used=running, num_slots=4, pages_used=0, num_pages=100, is_healthy=True)
    fields.update(kw)
    return ReplicaReport(name, cached_prefix_tokens=cached, num_running=running,
                         num_waiting=waiting, **fields)  # fmt: skip


IDLE = Routed(Counter(), Counter())


def test_a_conversation_goes_to_the_replica_holding_its_longest_cached_prefix():
    reports = [report("replica-0", cached=12), report("replica-1", cached=40, running=1)]
    choice = AffinityRouting().choose(reports, IDLE)
    assert (choice.replica, choice.reason) == ("replica-1", "prefix")


def test_without_a_cached_prefix_the_replica_with_a_free_slot_wins():
    full = report("replica-0", running=4)
    assert not full.can_admit
    choice = AffinityRouting().choose([full, report("replica-1", running=3, waiting=5)], IDLE)
    assert (choice.replica, choice.reason) == ("replica-1", "room")


def test_room_compares_queued_work_then_free_pages():
    busy, light = report("replica-0", running=2), report("replica-1", running=1)
    assert AffinityRouting().choose([busy, light], IDLE).replica == "replica-1"
    tight = report("replica-0", pages_used=90)
    roomy = report("replica-1", pages_used=10)
    assert AffinityRouting().choose([tight, roomy], IDLE).replica == "replica-1"


def test_affinity_yields_to_the_imbalance_bound():
    holder = report("replica-0", cached=100, running=3, waiting=3)
    idle = report("replica-1")
    assert AffinityRouting(max_imbalance=6).choose([holder, idle], IDLE).replica == "replica-0"
    choice = AffinityRouting(max_imbalance=5).choose([holder, idle], IDLE)
    assert (choice.replica, choice.reason) == ("replica-1", "room")


def test_the_routers_own_in_flight_count_covers_a_report_that_lags():
    """A request just forwarded is not in the replica's published queue until its next step."""
    reports = [report("replica-0", cached=10), report("replica-1")]
    routed = Routed(Counter({"replica-0": 3}), Counter({"replica-0": 3}))
    assert AffinityRouting(max_imbalance=2).choose(reports, routed).replica == "replica-1"


def test_equal_requests_in_sequence_alternate():
    """Ties break on the requests routed so far, so 40 idle-time requests split 20/20."""
    policy, total = AffinityRouting(), Counter()
    for _ in range(40):
        chosen = policy.choose([report("replica-0"), report("replica-1")], Routed(Counter(), total))
        total[chosen.replica] += 1
    assert total == Counter({"replica-0": 20, "replica-1": 20})


def test_an_unhealthy_replica_is_never_chosen_and_none_left_is_an_error():
    down = report("replica-0", cached=50, is_healthy=False)
    busy = report("replica-1", running=3)
    assert AffinityRouting().choose([down, busy], IDLE).replica == "replica-1"
    with pytest.raises(NoReplicaError, match="no replica is serving"):
        AffinityRouting().choose([down], IDLE)
    with pytest.raises(NoReplicaError):
        RoundRobinRouting().choose([], IDLE)


def test_round_robin_takes_each_replica_in_turn_whatever_it_holds():
    policy = RoundRobinRouting()
    reports = [report("replica-1"), report("replica-0", cached=99)]
    assert [policy.choose(reports, IDLE).replica for _ in range(3)] == [
        "replica-0", "replica-1", "replica-0"
    ]  # fmt: skip


def test_a_policy_is_chosen_by_name_and_a_bad_one_is_named():
    assert isinstance(routing_policy("affinity", 2), AffinityRouting)
    with pytest.raises(ValueError, match="--routing = 'nearest'"):
        routing_policy("nearest")
    with pytest.raises(ValueError, match="max_imbalance = -1"):
        AffinityRouting(max_imbalance=-1)
