"""Simulation scenarios: a catalog, a device model, requests, a policy, a seed, and the
policies to compare (``policies: [helios, vllm, ...]``, Helios alone by default), one
workload of the harness (``harness.scenario_setup``). A malformed scenario fails with a
message naming the key. See docs/simulate.md."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ignition.components.catalog import Catalog, descriptor_from_json
from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import CatalogError, GraphKind
from ignition.helios import (
    PolicyConfig,
    Resources,
    SchedulerError,
    SpeculationMode,
    policy_from_preset,
)
from ignition.simulate.baselines import HELIOS, PolicyError, parse_policy
from ignition.simulate.devices import (
    FORMULA_KEYS,
    DeviceError,
    DeviceModel,
    Durations,
    Formula,
    device_from_spec,
)
from ignition.simulate.workloads import SimRequest

__all__ = ["Durations", "Formula", "Scenario", "ScenarioError", "SimRequest", "load_scenario"]


class ScenarioError(ValueError):
    """A scenario file that cannot be simulated; the message names the key."""


@dataclass(frozen=True)
class Scenario:
    catalog: Catalog
    durations: DeviceModel
    requests: tuple[SimRequest, ...]
    policy: PolicyConfig
    seed: int = 0
    end_ms: float = 10_000.0
    noise_sigma: float = 0.03
    preseed_costs: bool = False
    speculation: SpeculationMode = SpeculationMode.ADAPTIVE
    resources: Resources = field(default_factory=Resources)
    confidence_noise: float = 0.0  # drafter confidence noise (acceptance.CONFIDENCE)
    policies: tuple[str, ...] = (HELIOS,)  # what the scenario compares (Helios's variants too)


def _get(
    data: Mapping[str, Any], key: str, where: str, kind: type | tuple, default: Any = ...
) -> Any:
    if key not in data:
        if default is ...:
            raise ScenarioError(f"{where}.{key}: missing")
        return default
    value = data[key]
    if isinstance(value, bool) and kind is not bool:
        raise ScenarioError(f"{where}.{key} = {value!r}: expected {kind}")
    if kind is float and isinstance(value, int):
        value = float(value)
    if not isinstance(value, kind):
        raise ScenarioError(
            f"{where}.{key} = {value!r}: expected {getattr(kind, '__name__', kind)}"
        )
    if isinstance(value, float) and (not math.isfinite(value) or value < 0):
        raise ScenarioError(f"{where}.{key} = {value!r}: must be finite and nonnegative")
    return value


def _check_keys(data: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
    for key in data:
        if key not in allowed:
            raise ScenarioError(f"{where}.{key}: unknown key (known: {', '.join(allowed)})")


def _catalog(data: Any) -> Catalog:
    if not isinstance(data, Mapping):
        raise ScenarioError("catalog: expected a mapping with 'descriptors' or 'recipe'")
    _check_keys(data, ("descriptors", "recipe", "options", "grid"), "catalog")
    if "grid" in data:
        return Catalog("scenario", {}, tuple(_grid(_get(data, "grid", "catalog", dict))))
    if "descriptors" in data:
        items = _get(data, "descriptors", "catalog", list)
        try:
            descriptors = tuple(
                descriptor_from_json(item, f"catalog.descriptors[{i}]")
                for i, item in enumerate(items)
            )
            return Catalog("scenario", {}, descriptors)
        except CatalogError as err:
            raise ScenarioError(str(err)) from None
    name = _get(data, "recipe", "catalog", str)
    from ignition.components.capacity import plan_catalog
    from ignition.recipes import get_recipe, parse_load_options

    try:
        options = parse_load_options(data.get("options", {}), "catalog.options")
        return plan_catalog(get_recipe(name), options)
    except (ValueError, KeyError) as err:
        raise ScenarioError(f"catalog: {err}") from None


GRID_KEYS = ("batch_capacity", "token_capacity", "prefill_capacity", "max_packed")


def _ints(data: Mapping[str, Any], key: str, where: str, default: list[int]) -> list[int]:
    values = _get(data, key, where, list, default)
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ScenarioError(f"{where}.{key}[{i}] = {v!r}: expected a positive integer")
    return values


_GRID_KINDS = (GraphKind.PREFILL, GraphKind.DECODE, GraphKind.SPECULATIVE, GraphKind.MIXED)


def _grid(data: Mapping[str, Any]) -> list[Descriptor]:
    """Compact catalogs: every combination of the listed capacities per kind.

    Widths above one are speculative (D = W - 1, host-allocated, rectangular P = B x W)
    and are kept only while B x W <= max_packed.
    """
    out: list[Descriptor] = []
    for kind_name, spec in data.items():
        where = f"catalog.grid.{kind_name}"
        try:
            kind = GraphKind(kind_name)
        except ValueError:
            raise ScenarioError(f"{where}: unknown graph kind") from None
        if kind not in _GRID_KINDS:
            raise ScenarioError(f"{where}: not a kind Helios schedules as a round")
        if not isinstance(spec, Mapping):
            raise ScenarioError(f"{where}: expected a mapping of {', '.join(GRID_KEYS)}")
        _check_keys(spec, GRID_KEYS, where)
        batches = _ints(spec, "batch_capacity", where, [1])
        widths = _ints(spec, "token_capacity", where, [1])
        prompts = _ints(spec, "prefill_capacity", where, [0]) if kind is GraphKind.MIXED else [0]
        max_packed = _get(spec, "max_packed", where, int, 1 << 30)
        try:
            for b, w, c in itertools.product(batches, widths, prompts):
                if kind is GraphKind.PREFILL:
                    out.append(Descriptor(kind, b, 0, w, b * w))
                elif b * w <= max_packed:
                    depth = w - 1 if kind in (GraphKind.SPECULATIVE, GraphKind.MIXED) else 0
                    out.append(
                        Descriptor(
                            kind,
                            b,
                            depth,
                            w,
                            b * w,
                            prefill_capacity=c,
                            confidence_width=depth,
                            speculation_enabled=kind is GraphKind.SPECULATIVE or w > 1,
                        )
                    )
        except CatalogError as err:
            raise ScenarioError(f"{where}: {err}") from None
    return out


def _durations(data: Any) -> Durations:
    if not isinstance(data, Mapping):
        raise ScenarioError("durations: expected a mapping with 'table' and/or 'formula'")
    _check_keys(data, ("table", "formula"), "durations")
    table = {}
    for name, ms in _get(data, "table", "durations", dict, {}).items():
        table[str(name)] = _get({name: ms}, name, "durations.table", float)
    formulas = {}
    for kind, spec in _get(data, "formula", "durations", dict, {}).items():
        where = f"durations.formula.{kind}"
        if not isinstance(spec, Mapping):
            raise ScenarioError(f"{where}: expected a mapping of {', '.join(FORMULA_KEYS)}")
        _check_keys(spec, FORMULA_KEYS, where)
        formulas[str(kind)] = Formula(**{k: _get(spec, k, where, float, 0.0) for k in FORMULA_KEYS})
    return Durations(table, formulas)


def _floats(data: Mapping[str, Any], key: str, where: str) -> tuple[float, ...]:
    values = _get(data, key, where, list, [])
    out = []
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
            raise ScenarioError(f"{where}.{key}[{i}] = {v!r}: expected a probability")
        out.append(float(v))
    return tuple(out)


def _request(data: Any, where: str) -> SimRequest:
    if not isinstance(data, Mapping):
        raise ScenarioError(f"{where}: expected a mapping")
    allowed = (
        "arrival_ms",
        "prompt_tokens",
        "output_tokens",
        "acceptance",
        "message_endpoints",
        "acceptance_prior",
        "count",
    )
    _check_keys(data, allowed, where)
    return SimRequest(
        arrival_ms=_get(data, "arrival_ms", where, float, 0.0),
        prompt_tokens=_get(data, "prompt_tokens", where, int),
        output_tokens=_get(data, "output_tokens", where, int),
        acceptance=_floats(data, "acceptance", where),
        message_endpoints=tuple(_get(data, "message_endpoints", where, list, [])),
        acceptance_prior=_floats(data, "acceptance_prior", where),
    )


def _policy(data: Any) -> PolicyConfig:
    if data is None:
        return PolicyConfig()
    if not isinstance(data, Mapping):
        raise ScenarioError("policy: expected a mapping")
    values = dict(data)
    preset = values.pop("preset", "balanced")
    try:
        return policy_from_preset(str(preset), **values)
    except (SchedulerError, TypeError) as err:
        raise ScenarioError(f"policy: {err}") from None


def _device(data: Mapping[str, Any]) -> DeviceModel:
    """``device: h200 | measured:PATH`` names a device model; else ``durations``."""
    if "device" in data:
        if "durations" in data:
            raise ScenarioError("scenario: give either device or durations, not both")
        spec = _get(data, "device", "scenario", str)
        try:
            return device_from_spec(spec)
        except DeviceError as err:
            raise ScenarioError(f"scenario.device: {err}") from None
    return _durations(_get(data, "durations", "scenario", dict))


TOP_KEYS = (
    "catalog",
    "device",
    "durations",
    "requests",
    "policy",
    "seed",
    "end_ms",
    "noise_sigma",
    "preseed_costs",
    "speculation",
    "resources",
    "policies",
)


def _policies(data: Mapping[str, Any]) -> tuple[str, ...]:
    names = _get(data, "policies", "scenario", list, [HELIOS])
    if not names:
        raise ScenarioError("scenario.policies: empty (default: [helios])")
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise ScenarioError(f"scenario.policies[{i}] = {name!r}: expected a policy name")
        try:
            parse_policy(name)
        except PolicyError as err:
            raise ScenarioError(f"scenario.policies[{i}]: {err}") from None
    return tuple(dict.fromkeys(names))


def scenario_from_dict(data: Any) -> Scenario:
    if not isinstance(data, Mapping):
        raise ScenarioError("scenario: expected a mapping at the top level")
    _check_keys(data, TOP_KEYS, "scenario")
    requests: list[SimRequest] = []
    for i, item in enumerate(_get(data, "requests", "scenario", list)):
        request = _request(item, f"requests[{i}]")
        count = _get(item, "count", f"requests[{i}]", int, 1)
        requests += [request] * count
    try:
        speculation = SpeculationMode(data.get("speculation", "adaptive"))
    except ValueError:
        raise ScenarioError(
            f"scenario.speculation = {data['speculation']!r}: expected fixed or adaptive"
        ) from None
    resources_data = _get(data, "resources", "scenario", dict, {})
    try:
        resources = Resources(**resources_data)
    except (TypeError, SchedulerError) as err:
        raise ScenarioError(f"scenario.resources: {err}") from None
    return Scenario(
        catalog=_catalog(_get(data, "catalog", "scenario", dict)),
        durations=_device(data),
        requests=tuple(requests),
        policy=_policy(data.get("policy")),
        seed=_get(data, "seed", "scenario", int, 0),
        end_ms=_get(data, "end_ms", "scenario", float, 10_000.0),
        noise_sigma=_get(data, "noise_sigma", "scenario", float, 0.03),
        preseed_costs=_get(data, "preseed_costs", "scenario", bool, False),
        speculation=speculation,
        resources=resources,
        policies=_policies(data),
    )


def load_scenario(path: str | Path) -> Scenario:
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such scenario file") from None
    except yaml.YAMLError as err:
        raise ScenarioError(f"{path}: not valid YAML ({err})") from None
    try:
        return scenario_from_dict(data)
    except ScenarioError as err:
        raise ScenarioError(f"{path}: {err}") from None
