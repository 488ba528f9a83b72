"""The simulator's PLE delivery cost per residency (ignition/simulate/ple_delivery.py)."""

from __future__ import annotations

import pytest

from ignition.simulate.ple_delivery import DeliveryProfile, delivery_ns, exposed_ns

ROW = 320  # 160 bf16 values
ROWS = 4096 * 8  # a 4096-token chunk, 8 n-gram heads


def test_device_is_cheaper_than_host_and_host_cheaper_than_a_cold_disk():
    device = delivery_ns("device", ROWS, ROW)
    host = delivery_ns("host", ROWS, ROW)
    disk = delivery_ns("disk", ROWS, ROW, cache_hit_rate=0.0)
    assert 0 < device < host < disk


def test_a_warmer_cache_delivers_faster():
    costs = [delivery_ns("disk", ROWS, ROW, cache_hit_rate=h) for h in (0.0, 0.5, 0.9, 1.0)]
    assert costs == sorted(costs, reverse=True) and len(set(costs)) == 4


def test_a_fully_cached_disk_costs_what_host_residency_costs():
    assert delivery_ns("disk", ROWS, ROW, cache_hit_rate=1.0) == delivery_ns("host", ROWS, ROW)


def test_disk_misses_pay_latency_per_batch_of_concurrent_reads():
    profile = DeliveryProfile(disk_queue_depth=4, disk_bandwidth=1e18, host_bandwidth=1e18,
                              pcie_bandwidth=1e18, mailbox_ns=0)  # fmt: skip
    assert delivery_ns("disk", 8, ROW, profile) == pytest.approx(2 * 80e-6 * 1e9, abs=2)
    assert delivery_ns("disk", 9, ROW, profile) == pytest.approx(3 * 80e-6 * 1e9, abs=2)


def test_host_rows_on_cpu_skip_the_pcie_copy():
    gpu = delivery_ns("host", ROWS, ROW, DeliveryProfile())
    cpu = delivery_ns("host", ROWS, ROW, DeliveryProfile(has_pcie=False))
    assert cpu < gpu


def test_preloaded_host_rows_gathered_in_the_program_skip_the_mailbox():
    assert (
        delivery_ns("host", ROWS, ROW) - delivery_ns("host", ROWS, ROW, preload=True)
        == DeliveryProfile().mailbox_ns
    )


def test_cost_grows_with_the_rows_and_bytes():
    assert delivery_ns("host", 2 * ROWS, ROW) > delivery_ns("host", ROWS, ROW)
    assert delivery_ns("device", ROWS, 2 * ROW) > delivery_ns("device", ROWS, ROW)
    assert delivery_ns("disk", 0, ROW) == 0


def test_only_delivery_beyond_the_overlap_is_exposed():
    assert exposed_ns(900, overlap_ns=1000) == 0
    assert exposed_ns(1500, overlap_ns=1000) == 500
    assert exposed_ns(1500, overlap_ns=0) == 1500  # draft rows overlap nothing


def test_bad_inputs_fail_with_one_line():
    with pytest.raises(ValueError, match="residency = 'ssd'"):
        delivery_ns("ssd", 1, ROW)
    with pytest.raises(ValueError, match=r"cache_hit_rate = 1\.5"):
        delivery_ns("disk", 1, ROW, cache_hit_rate=1.5)
    with pytest.raises(ValueError, match="pcie_bandwidth = 0"):
        DeliveryProfile(pcie_bandwidth=0)
