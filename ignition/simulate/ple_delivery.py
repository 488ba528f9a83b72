"""What delivering a frame's PLE rows costs per residency (``device``, ``host``,
``disk``; docs/ple.md), for the simulator. Rows known before launch expose only what
exceeds the overlap with the previous frame (:func:`exposed_ns`); rows made inside the
program overlap nothing. Defaults are stated assumptions, not measurements
(docs/simulate.md, "ple_delivery.py")."""

from __future__ import annotations

import math
from dataclasses import dataclass

RESIDENCIES = ("device", "host", "disk")


@dataclass(frozen=True)
class DeliveryProfile:
    device_bandwidth: float = 2.0e12  # bytes/s of an HBM row gather (about 40% of peak)
    host_bandwidth: float = 20e9  # bytes/s of a random-row gather over DRAM
    pcie_bandwidth: float = 50e9  # bytes/s host to device (Gen5 x16, effective)
    disk_latency_s: float = 80e-6  # one random read
    disk_bandwidth: float = 6e9  # bytes/s of sustained reads
    disk_queue_depth: int = 32  # random reads in flight at once
    mailbox_ns: int = 20_000  # host wake-up plus readiness flag round trip
    has_pcie: bool = True  # False on CPU: host and device are one memory

    def __post_init__(self) -> None:
        for name in ("device_bandwidth", "host_bandwidth", "pcie_bandwidth", "disk_bandwidth"):
            if not getattr(self, name) > 0:
                raise ValueError(f"DeliveryProfile.{name} = {getattr(self, name)}: must be > 0")
        if self.disk_latency_s < 0 or self.disk_queue_depth < 1 or self.mailbox_ns < 0:
            raise ValueError("DeliveryProfile: latency and mailbox time >= 0, queue depth >= 1")


def delivery_ns(
    residency: str,
    num_rows: int,
    row_bytes: int,
    profile: DeliveryProfile = DeliveryProfile(),
    *,
    cache_hit_rate: float = 0.0,
    preload: bool = False,
) -> int:
    """Nanoseconds from published row ids to rows usable by the program."""
    if residency not in RESIDENCIES:
        raise ValueError(f"ple residency = {residency!r}: one of {', '.join(RESIDENCIES)}")
    if not 0.0 <= cache_hit_rate <= 1.0:
        raise ValueError(f"cache_hit_rate = {cache_hit_rate}: must lie in [0, 1]")
    if num_rows <= 0:
        return 0
    nbytes = num_rows * row_bytes
    if residency == "device":
        return _ns(nbytes / profile.device_bandwidth)
    copy_s = nbytes / profile.pcie_bandwidth if profile.has_pcie else 0.0
    if residency == "host":
        mailbox = 0 if preload else profile.mailbox_ns
        return _ns(nbytes / profile.host_bandwidth + copy_s) + mailbox
    misses = num_rows * (1.0 - cache_hit_rate)
    hits_s = num_rows * cache_hit_rate * row_bytes / profile.host_bandwidth
    batches = math.ceil(misses / profile.disk_queue_depth) if misses > 0 else 0
    miss_s = batches * profile.disk_latency_s + misses * row_bytes / profile.disk_bandwidth
    return _ns(hits_s + miss_s + copy_s) + profile.mailbox_ns


def exposed_ns(delivery: int, overlap_ns: int) -> int:
    """The part of a delivery the frame waits for: resolution overlapped with the previous
    frame (rows known before launch) is free; draft rows have ``overlap_ns`` 0."""
    return max(0, delivery - max(0, overlap_ns))


def _ns(seconds: float) -> int:
    return math.ceil(seconds * 1e9)
