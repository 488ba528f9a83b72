"""PLE delivery charged to every simulated execution (``h200+ple:disk``,
``+ple:device|host|disk``, optionally ``,preload``, ``,hit=0.9``), so residency choices
show in ``ignition simulate``; docs/simulate.md, "ple_charge.py"."""

from __future__ import annotations

from dataclasses import dataclass, field

from ignition.simulate.devices import DeviceError, DeviceModel, Execution, device_from_spec
from ignition.simulate.ple_delivery import RESIDENCIES, DeliveryProfile, delivery_ns, exposed_ns

RELEASED_HEADS = 16
RELEASED_ROW_BYTES = 160


@dataclass(frozen=True)
class PleCharge:
    residency: str
    heads: int = RELEASED_HEADS
    row_bytes: int = RELEASED_ROW_BYTES
    cache_hit_rate: float = 0.0
    preload: bool = False
    profile: DeliveryProfile = field(default_factory=DeliveryProfile)

    def rows(self, e: Execution) -> tuple[int, int]:
        """(rows known before launch, rows made inside the program)."""
        inside = min(e.tokens, e.rows * e.draft_steps)
        return (e.tokens - inside) * self.heads, inside * self.heads

    def exposed_ms(self, e: Execution, overlap_ms: float) -> float:
        if self.residency == "device":
            return 0.0
        known, inside = self.rows(e)

        def cost(n: int) -> int:
            hit, preload = self.cache_hit_rate, self.preload
            return delivery_ns(
                self.residency, n, self.row_bytes, self.profile, cache_hit_rate=hit, preload=preload
            )

        waited = exposed_ns(cost(known), int(overlap_ms * 1e6)) + cost(inside)
        return waited / 1e6


@dataclass(frozen=True)
class PleChargedDevice:
    """A device model plus the exposed PLE delivery of each execution."""

    inner: DeviceModel
    charge: PleCharge

    @property
    def name(self) -> str:
        return f"{self.inner.name}+ple:{self.charge.residency}"

    def duration_ms(self, e: Execution) -> float:
        base = self.inner.duration_ms(e)
        return base + self.charge.exposed_ms(e, base)


def device_with_ple(spec: str) -> DeviceModel:
    """``device_from_spec`` plus an optional ``+ple:RESIDENCY[,preload][,hit=F]`` suffix."""
    head, sep, tail = spec.partition("+ple:")
    device = device_from_spec(head)
    if not sep:
        return device
    residency, *flags = tail.split(",")
    if residency not in RESIDENCIES:
        raise DeviceError(f"--device {spec!r}: ple residency {residency!r}, one of "
                          f"{', '.join(RESIDENCIES)}")  # fmt: skip
    preload, hit = False, 0.0
    for flag in flags:
        if flag == "preload":
            preload = True
        elif flag.startswith("hit="):
            try:
                hit = float(flag.removeprefix("hit="))
            except ValueError:
                hit = -1.0
            if not 0.0 <= hit <= 1.0:
                raise DeviceError(f"--device {spec!r}: {flag}: a cache hit rate in [0, 1]")
        else:
            raise DeviceError(f"--device {spec!r}: unknown ple flag {flag!r} (preload, hit=F)")
    return PleChargedDevice(device, PleCharge(residency, cache_hit_rate=hit, preload=preload))
