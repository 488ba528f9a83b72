"""Simulated devices: how long one execution takes (``base``, ``hybrid`` and
``profiles``, ``legacy``); :func:`device_from_spec` parses a device name."""

from __future__ import annotations

from ignition.simulate.devices.base import DeviceError, DeviceModel, Execution, execution_of
from ignition.simulate.devices.hybrid import H100, H200, Accelerator, HybridMoE
from ignition.simulate.devices.legacy import (
    FORMULA_KEYS,
    Durations,
    Formula,
    FormulaDevice,
    H200Roofline,
    MeasuredTable,
    load_measured,
)
from ignition.simulate.devices.profiles import PROFILES

__all__ = [
    "FORMULA_KEYS",
    "H100",
    "H200",
    "PROFILES",
    "Accelerator",
    "DeviceError",
    "DeviceModel",
    "Durations",
    "Execution",
    "Formula",
    "FormulaDevice",
    "H200Roofline",
    "HybridMoE",
    "MeasuredTable",
    "device_from_spec",
    "execution_of",
    "load_measured",
]


def device_from_spec(spec: str) -> DeviceModel:
    """A profile name (``PROFILES``), ``h200`` (the earlier roofline) or
    ``measured:PATH`` (a manifest or timing file); anything else is one line naming it."""
    if spec in PROFILES:
        return PROFILES[spec]
    if spec == "h200":
        return H200Roofline()
    if spec.startswith("measured:"):
        return load_measured(spec.removeprefix("measured:"))
    known = ", ".join([*PROFILES, "h200", "measured:PATH"])
    raise DeviceError(f"unknown device profile {spec!r} (known: {known})")
