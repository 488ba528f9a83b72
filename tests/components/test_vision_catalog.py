"""Issue 13 deliverable 3: kind ``vision`` in the catalog with recipe-declared patch
capacities; descriptors carry them; the CI catalog check counts them."""

from __future__ import annotations

import pytest

from ignition.components.capacity import plan_catalog
from ignition.components.catalog import catalog_from_json
from ignition.components.catalog_check import check_expected_catalogs
from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import CatalogError, GraphKind
from ignition.recipes import LoadOptions, get_recipe


def test_each_declared_patch_capacity_becomes_one_vision_descriptor():
    recipe = get_recipe("qwen35")
    catalog = plan_catalog(recipe, LoadOptions())
    vision = catalog.of_kind(GraphKind.VISION)
    assert [d.patch_capacity for d in vision] == list(recipe.capacity.vision_patch_capacities)
    assert catalog.max_patch_capacity() == max(recipe.capacity.vision_patch_capacities)
    assert all(d.max_packed_extent == 0 and d.name.startswith("vision-") for d in vision)


def test_vision_descriptors_survive_the_json_round_trip_with_their_capacity():
    catalog = plan_catalog(get_recipe("qwen35"), LoadOptions())
    again = catalog_from_json(catalog.to_json())
    assert [d.patch_capacity for d in again.of_kind(GraphKind.VISION)] == [256, 1024, 4096]
    assert again.counts()["vision"] == 3


def test_vision_descriptor_needs_width_equal_to_its_patch_capacity():
    with pytest.raises(CatalogError, match="vision program has W = P"):
        Descriptor(GraphKind.VISION, 2, 0, 256, 128)


@pytest.mark.parametrize("name", ["qwen35", "qwen35-moe"])
def test_catalog_check_counts_vision_programs(name):
    recipe = get_recipe(name)
    failures, lines = check_expected_catalogs(recipe)
    assert failures == []
    assert all("vision=" in line for line in lines)
    assert all("vision" in e.counts for e in recipe.expected_catalogs)
