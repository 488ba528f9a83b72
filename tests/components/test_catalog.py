"""The Descriptor contract: fields, validation and the versioned JSON catalog."""

from __future__ import annotations

import json

import pytest

from ignition.components.capacity import plan_catalog
from ignition.components.catalog import CATALOG_VERSION, Catalog, load_catalog, save_catalog
from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import CatalogError, GraphKind, ValueSource
from ignition.recipes import LoadOptions, get_recipe

FIELDS = {
    "kind",
    "batch_capacity",
    "proposal_depth",
    "token_capacity",
    "packed_capacity",
    "prefill_capacity",
    "confidence_width",
    "speculation_enabled",
    "value_source",
    "estimated_duration_ns",
    "max_packed_extent",
}


def qwen_catalog() -> Catalog:
    return plan_catalog(get_recipe("qwen38"), LoadOptions(mixed_prefill=True))


def mixed(**overrides) -> Descriptor:
    fields = dict(
        kind=GraphKind.MIXED,
        batch_capacity=2,
        proposal_depth=1,
        token_capacity=2,
        packed_capacity=4,
        prefill_capacity=512,
        confidence_width=1,
        speculation_enabled=True,
    )
    fields.update(overrides)
    return Descriptor(**fields)


def test_descriptor_json_has_exactly_the_contract_fields():
    for d in qwen_catalog().descriptors:
        assert set(d.to_json()) == FIELDS


def test_catalog_round_trips_through_json(tmp_path):
    catalog = qwen_catalog()
    path = tmp_path / "catalog.json"
    save_catalog(catalog, path)
    loaded = load_catalog(path)
    assert loaded == catalog
    assert json.loads(path.read_text())["version"] == CATALOG_VERSION


def test_estimated_duration_is_zero_on_load_whatever_the_file_says(tmp_path):
    data = qwen_catalog().to_json()
    for item in data["descriptors"]:
        item["estimated_duration_ns"] = 123_456
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(data))
    assert all(d.estimated_duration_ns == 0 for d in load_catalog(path).descriptors)


def test_missing_field_is_named(tmp_path):
    data = qwen_catalog().to_json()
    del data["descriptors"][3]["packed_capacity"]
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CatalogError, match=r"descriptors\[3\]: field 'packed_capacity' is missing"):
        load_catalog(path)


def test_unknown_kind_is_named(tmp_path):
    data = qwen_catalog().to_json()
    data["descriptors"][0]["kind"] = "teleport"
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CatalogError, match=r"descriptors\[0\]: field 'kind' = 'teleport'"):
        load_catalog(path)


def test_wrong_version_is_rejected(tmp_path):
    data = qwen_catalog().to_json()
    data["version"] = 99
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CatalogError, match="'version' = 99"):
        load_catalog(path)


def test_not_json_is_a_clear_error(tmp_path):
    path = tmp_path / "catalog.json"
    path.write_text("{nope")
    with pytest.raises(CatalogError, match="not valid JSON"):
        load_catalog(path)


def test_mixed_prefill_capacity_must_be_a_multiple_of_64():
    with pytest.raises(CatalogError, match="'prefill_capacity' = 500"):
        mixed(prefill_capacity=500)


def test_packed_capacity_cannot_exceed_b_times_w():
    with pytest.raises(CatalogError, match="'packed_capacity' = 5: exceeds"):
        mixed(packed_capacity=5)


def test_mixed_batch_must_be_a_power_of_two_of_at_least_two():
    with pytest.raises(CatalogError, match="'batch_capacity' = 3"):
        mixed(batch_capacity=3, packed_capacity=6)
    with pytest.raises(CatalogError, match="'batch_capacity' = 1"):
        mixed(batch_capacity=1, packed_capacity=2)


def test_only_mixed_programs_have_a_prefill_capacity():
    with pytest.raises(CatalogError, match="only mixed programs"):
        Descriptor(GraphKind.DECODE, 2, 0, 1, 2, prefill_capacity=64)


def test_width_cannot_exceed_proposal_depth_plus_one():
    with pytest.raises(CatalogError, match="'token_capacity' = 3: exceeds proposal_depth"):
        Descriptor(GraphKind.SPECULATIVE, 1, 1, 3, 3, speculation_enabled=True)


def test_device_allocation_needs_a_speculative_program_with_proposals():
    with pytest.raises(CatalogError, match="'value_source'"):
        Descriptor(GraphKind.DECODE, 2, 0, 1, 2, value_source=ValueSource.SPECULATIVE_PREFIX_LIMIT)


def test_max_packed_extent_must_match_the_shape():
    with pytest.raises(CatalogError, match="'max_packed_extent' = 7"):
        mixed(max_packed_extent=7)


def test_duplicate_programs_are_rejected():
    d = mixed()
    with pytest.raises(CatalogError, match="duplicates"):
        Catalog(recipe="x", options={}, descriptors=(d, d))


def test_cost_key_ignores_estimates():
    from dataclasses import replace

    d = mixed()
    assert replace(d, estimated_duration_ns=5).cost_key() == d.cost_key()
    assert mixed(prefill_capacity=1024).cost_key() != d.cost_key()
