"""The earlier device models: the invented-model roofline (``h200``), the seed's
formula and measured tables (docs/simulate.md, "devices/legacy.py")."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ignition.components.descriptor import Descriptor
from ignition.simulate.devices.base import DeviceError, Execution


@dataclass(frozen=True)
class H200Roofline:
    """The reference roofline for a full-size Qwen3.8 Flash on one H200: matrix terms
    (expert weights touched, arithmetic) at the physical capacities, state and cache terms
    at the active rows and their cached context, as the timing page prescribes."""

    name: str = "h200"
    bandwidth: float = 4.3e12
    flops: float = 790e12
    bandwidth_fraction: float = 0.7
    flops_fraction: float = 0.55
    floor_ms: float = 1.5
    draft_step_ms: float = 0.25
    dense_bytes: float = 2.4e9
    expert_bytes: float = 6.3e6
    num_experts: int = 512
    routed_experts: int = 10
    num_layers: int = 48
    kv_bytes_per_token: float = 24.6e3
    state_bytes_per_row: float = 75e6
    active_params: float = 3e9

    def experts_touched(self, n: int) -> float:
        return self.num_experts * (1 - math.exp(-self.routed_experts * n / self.num_experts))

    def duration_ms(self, e: Execution) -> float:
        n = max(1, e.capacity_tokens)
        rows = max(1, e.rows)
        moved = (
            self.dense_bytes
            + self.num_layers * self.experts_touched(n) * self.expert_bytes
            + e.context * self.kv_bytes_per_token
            + e.rows * 2 * self.state_bytes_per_row
        )
        work = 2 * self.active_params * n + 4 * 12 * 16 * 256 * n * (e.context / rows + n / 2)
        seconds = max(
            moved / (self.bandwidth_fraction * self.bandwidth),
            work / (self.flops_fraction * self.flops),
        )
        return self.floor_ms + seconds * 1e3 + self.draft_step_ms * e.draft_steps


FORMULA_KEYS = ("base_ms", "per_row_ms", "per_token_ms", "per_draft_ms")


@dataclass(frozen=True)
class Formula:
    """T = base + per_row * B + per_token * packed tokens + per_draft * D (capacities)."""

    base_ms: float = 0.0
    per_row_ms: float = 0.0
    per_token_ms: float = 0.0
    per_draft_ms: float = 0.0

    def duration_ms(self, d: Descriptor) -> float:
        return self.at(d.batch_capacity, d.packed_capacity + d.prefill_capacity, d.proposal_depth)

    def at(self, rows: int, tokens: int, drafts: int) -> float:
        return (
            self.base_ms
            + self.per_row_ms * rows
            + self.per_token_ms * tokens
            + self.per_draft_ms * drafts
        )


@dataclass(frozen=True)
class FormulaDevice:
    """The seed's durations: a table entry by graph name wins over the kind's formula.

    Baseline batches without a descriptor use the formula at their active extents.
    """

    table: Mapping[str, float] = field(default_factory=dict)
    formulas: Mapping[str, Formula] = field(default_factory=dict)
    name: str = "formula"

    def duration_ms(self, e: Execution) -> float:
        d = e.descriptor
        if d is not None and d.name in self.table:
            return self.table[d.name]
        formula = self.formulas.get(e.kind.value)
        if formula is None:
            what = d.name if d is not None else f"a {e.kind.value} batch"
            raise DeviceError(
                f"durations: no table entry for {what} and no {e.kind.value!r} formula"
            )
        return formula.at(e.capacity_rows, e.capacity_tokens, e.draft_steps)


Durations = FormulaDevice  # the scenario's historical name


@dataclass(frozen=True)
class MeasuredTable:
    """Durations measured per prepared graph, looked up by name. A baseline's batch (no
    descriptor) runs on the smallest measured graph of its kind whose capacities cover it,
    as a runtime with only these graphs would have to."""

    durations: Mapping[str, float]
    descriptors: tuple[Descriptor, ...] = ()
    name: str = "measured"

    def duration_ms(self, e: Execution) -> float:
        d = e.descriptor
        if d is not None:
            if d.name not in self.durations:
                raise DeviceError(f"{self.name}: no measured duration for graph {d.name}")
            return self.durations[d.name]
        covering = [
            c
            for c in self.descriptors
            if c.name in self.durations
            and c.kind is e.kind
            and c.batch_capacity >= e.rows
            and c.packed_capacity + c.prefill_capacity >= e.capacity_tokens
            and c.proposal_depth >= e.draft_steps
        ]
        if not covering:
            raise DeviceError(
                f"{self.name}: no measured {e.kind.value} graph covers {e.rows} rows, "
                f"{e.capacity_tokens} tokens, {e.draft_steps} drafts"
            )
        return min(self.durations[c.name] for c in covering)


def _descriptor(item: Mapping) -> Descriptor | None:
    from ignition.components.catalog import descriptor_from_json
    from ignition.components.program_kinds import CatalogError

    fields_ = {k: v for k, v in item.items() if k not in ("name", "validation_ns", "capture_bytes")}
    try:
        return descriptor_from_json(fields_, str(item.get("name")))
    except (CatalogError, KeyError, TypeError, ValueError):
        return None


def load_measured(path: str | Path) -> MeasuredTable:
    """A build manifest (``programs[].validation_ns``), a JSON timing file
    (``{"graphs": {name: ms}}`` or ``{name: ms}``) or a CSV with ``graph,ms`` columns."""
    path = Path(path)
    if not path.exists():
        raise DeviceError(f"{path}: no such timing file")
    if path.suffix == ".csv":
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in ("graph", "ms") if c not in (reader.fieldnames or [])]
            if missing:
                raise DeviceError(f"{path}: missing column {missing[0]!r} (need graph, ms)")
            table = {}
            for i, row in enumerate(reader, start=2):
                table[row["graph"]] = _positive_ms(row["ms"], f"{path}:{i}: ms")
        return MeasuredTable(table, name=f"measured:{path.name}")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise DeviceError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(data, Mapping):
        raise DeviceError(f"{path}: expected a JSON object")
    if "programs" in data:
        table, descriptors = {}, []
        for i, item in enumerate(data["programs"]):
            if not isinstance(item, Mapping) or "name" not in item or "validation_ns" not in item:
                raise DeviceError(f"{path}: programs[{i}]: needs name and validation_ns")
            table[str(item["name"])] = _positive_ms(
                item["validation_ns"] / 1e6, f"{path}: programs[{i}].validation_ns"
            )
            d = _descriptor(item)
            if d is not None:
                descriptors.append(d)
        return MeasuredTable(table, tuple(descriptors), name=f"measured:{path.name}")
    graphs = data.get("graphs", data)
    if not isinstance(graphs, Mapping):
        raise DeviceError(f"{path}: graphs: expected a mapping of graph name to ms")
    table = {str(k): _positive_ms(v, f"{path}: graphs.{k}") for k, v in graphs.items()}
    return MeasuredTable(table, name=f"measured:{path.name}")


def _positive_ms(value: object, where: str) -> float:
    try:
        ms = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise DeviceError(f"{where} = {value!r}: expected a number of ms") from None
    if not math.isfinite(ms) or ms <= 0:
        raise DeviceError(f"{where} = {value!r}: must be a positive duration")
    return ms
