"""Device models: the H200 roofline as the timing page writes it, the formula, and a
measured table from a build manifest or a timing file (issue 12 item 2)."""

from __future__ import annotations

import json

import pytest

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.simulate.devices import (
    DeviceError,
    Execution,
    Formula,
    FormulaDevice,
    H200Roofline,
    device_from_spec,
    execution_of,
    load_measured,
)

H200 = H200Roofline()


def eager(kind: GraphKind, tokens: int, rows: int, context: int, drafts: int = 0) -> float:
    return H200.duration_ms(Execution(kind, tokens, rows, tokens, rows, context, drafts))


@pytest.mark.parametrize(
    ("kind", "tokens", "rows", "context", "drafts", "ms"),
    [
        (GraphKind.DECODE, 1, 1, 2000, 0, 3.4),
        (GraphKind.DECODE, 4, 4, 8000, 0, 6.4),
        (GraphKind.DECODE, 16, 16, 32000, 0, 17),
        (GraphKind.DECODE, 64, 64, 128000, 0, 43),
        (GraphKind.SPECULATIVE, 6, 2, 4000, 5, 9.4),
        (GraphKind.SPECULATIVE, 6, 2, 4000, 2, 8.6),
        (GraphKind.SPECULATIVE, 24, 4, 8000, 5, 23),
        (GraphKind.PREFILL, 64, 1, 0, 0, 39),
        (GraphKind.PREFILL, 512, 1, 0, 0, 54),
        (GraphKind.PREFILL, 4096, 1, 0, 0, 62),
        (GraphKind.MIXED, 515, 4, 6000, 0, 54),
    ],
)
def test_roofline_reproduces_the_timing_pages_examples(kind, tokens, rows, context, drafts, ms):
    assert eager(kind, tokens, rows, context, drafts) == pytest.approx(ms, rel=0.03, abs=0.1)


def test_a_padded_graph_pays_capacity_for_matrix_terms_and_active_rows_for_state():
    d32 = Descriptor(GraphKind.DECODE, 32, 0, 1, 32)
    padded = H200.duration_ms(execution_of(d32, tokens=4, rows=4, context=8000))
    full = H200.duration_ms(execution_of(d32, tokens=32, rows=32, context=64000))
    small = eager(GraphKind.DECODE, 4, 4, 8000)
    assert small < padded < full


def test_formula_device_prefers_the_table_and_times_baseline_batches_by_formula():
    d = Descriptor(GraphKind.DECODE, 4, 0, 1, 4)
    device = FormulaDevice({d.name: 7.0}, {"decode": Formula(base_ms=2.0, per_row_ms=1.0)})
    assert device.duration_ms(execution_of(d, 4, 4, 0)) == 7.0
    assert device.duration_ms(Execution(GraphKind.DECODE, 3, 3, 3, 3, 0)) == 5.0
    with pytest.raises(DeviceError, match="no 'prefill' formula"):
        device.duration_ms(Execution(GraphKind.PREFILL, 64, 1, 64, 1, 0))


def test_a_measured_table_loads_from_a_build_manifest(tmp_path):
    d = Descriptor(GraphKind.DECODE, 8, 0, 1, 8)
    manifest = {"programs": [{"name": d.name, **d.to_json(), "validation_ns": 4_500_000}]}
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest))
    table = load_measured(path)
    assert table.duration_ms(execution_of(d, 8, 8, 0)) == 4.5
    # a baseline batch of 5 rows runs on the smallest measured graph covering it
    assert table.duration_ms(Execution(GraphKind.DECODE, 5, 5, 5, 5, 0)) == 4.5


def test_a_measured_table_loads_from_a_timing_file_and_names_a_missing_graph(tmp_path):
    path = tmp_path / "timings.json"
    path.write_text(json.dumps({"graphs": {"decode-b4": 3.0}}))
    table = device_from_spec(f"measured:{path}")
    d = Descriptor(GraphKind.DECODE, 8, 0, 1, 8)
    with pytest.raises(DeviceError, match=f"no measured duration for graph {d.name}"):
        table.duration_ms(execution_of(d, 8, 8, 0))


def test_a_timing_csv_without_the_ms_column_is_one_line_naming_it(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("graph,duration\ndecode-b4,3\n")
    with pytest.raises(DeviceError, match="missing column 'ms'"):
        load_measured(path)


def test_an_unknown_device_name_is_one_line_naming_it():
    with pytest.raises(DeviceError, match="unknown device profile 'a100' \\(known: qwen38-"):
        device_from_spec("a100")
