"""Prompt lanes (issue 39): a prefill or mixed program may carry L prompts in one bucket.

The recipe declares L per prompt bucket (``capacity.prompt_lanes``); capacity prepares
one single-lane and one L-lane program there; the name gains ``-l{L}`` only when L > 1,
so every name and the catalog JSON of a one-lane program stay the seed's.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from ignition.components.capacity import CapacityError, plan_catalog
from ignition.components.catalog import Catalog, catalog_from_json
from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import CatalogError, GraphKind
from ignition.helios.plans import LaneRole, LaneWork, ScheduledPlan, SelectionReason
from ignition.helios.types import RequestHandle
from ignition.recipes import LoadOptions, RecipeError, get_recipe, load_recipe_file
from ignition.recipes.options import parse_load_options
from ignition.recipes.registry import RECIPES_DIR


def _recipe(tmp_path: Path, name: str, lanes: object):
    data = yaml.safe_load((RECIPES_DIR / name / "recipe.yaml").read_text())
    data["capacity"]["prompt_lanes"] = lanes
    data.pop("expected_catalogs", None)
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_recipe_file(path), path


def test_one_lane_names_and_json_are_the_seeds():
    d = Descriptor(GraphKind.PREFILL, 1, 0, 512, 512)
    assert d.name == "prefill-b1-d0-w512-p512" and "prompt_lanes" not in d.to_json()
    lanes = Descriptor(GraphKind.PREFILL, 1, 0, 512, 512, prompt_lanes=4)
    assert lanes.name == "prefill-b1-d0-w512-p512-l4" and lanes.to_json()["prompt_lanes"] == 4
    assert lanes.cost_key() != d.cost_key()
    assert (lanes.row_capacity, d.row_capacity, lanes.prompt_capacity) == (4, 1, 512)
    assert (lanes.lane_capacity, d.lane_capacity) == (128, 512)


def test_an_older_catalog_without_the_field_means_one_lane():
    d = Descriptor(GraphKind.PREFILL, 1, 0, 512, 512)
    data = Catalog("r", {}, (d,)).to_json()
    assert "prompt_lanes" not in data["descriptors"][0]
    assert catalog_from_json(data).descriptors[0].prompt_lanes == 1
    lanes = Catalog("r", {}, (Descriptor(GraphKind.PREFILL, 1, 0, 512, 512, prompt_lanes=2),))
    assert catalog_from_json(lanes.to_json()).descriptors[0].prompt_lanes == 2


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        (dict(kind=GraphKind.PREFILL, prompt_lanes=0), "must be at least 1"),
        (dict(kind=GraphKind.DECODE, prompt_lanes=2), "only prefill and mixed"),
        (dict(kind=GraphKind.MIXED, prompt_lanes=4), "keeps a decoder row"),
    ],
)
def test_bad_lane_counts_fail_naming_the_field(kwargs, why):
    kind = kwargs.pop("kind")
    shapes = {
        GraphKind.PREFILL: dict(batch_capacity=1, proposal_depth=0, token_capacity=64),
        GraphKind.DECODE: dict(batch_capacity=4, proposal_depth=0, token_capacity=1),
        GraphKind.MIXED: dict(
            batch_capacity=4, proposal_depth=0, token_capacity=1, prefill_capacity=64
        ),
    }[kind]
    packed = shapes["batch_capacity"] * shapes["token_capacity"]
    with pytest.raises(CatalogError, match=rf"field 'prompt_lanes' = .*{why}"):
        Descriptor(kind, packed_capacity=packed, **shapes, **kwargs)


def test_l_equal_one_everywhere_keeps_the_seed_contract(tmp_path: Path):
    recipe, _ = _recipe(tmp_path, "qwen38", {512: 1, 1024: 1})
    catalog = plan_catalog(recipe, LoadOptions(mixed_prefill=True))
    counts = catalog.counts()
    assert (counts["prefill"], counts["mixed_speculative"], counts["mixed_ordinary"]) == (
        10,
        22,
        20,
    )
    assert all(d.prompt_lanes == 1 for d in catalog.descriptors)


def test_declared_lanes_add_one_prefill_and_a_lane_twin_of_every_mixed_program(tmp_path: Path):
    seed, _ = _recipe(tmp_path, "qwen38", {})
    one = {d.name for d in plan_catalog(seed, LoadOptions(mixed_prefill=True)).descriptors}
    recipe, _ = _recipe(tmp_path, "qwen38", {512: 4, 1024: 2})
    catalog = plan_catalog(recipe, LoadOptions(mixed_prefill=True))
    added = [d for d in catalog.descriptors if d.prompt_lanes > 1]
    assert {d.name for d in catalog.descriptors if d.prompt_lanes == 1} == one
    prefills = {(d.token_capacity, d.prompt_lanes) for d in added if d.kind is GraphKind.PREFILL}
    assert prefills == {(512, 4), (1024, 2)}
    twins = [d for d in added if d.kind is GraphKind.MIXED]
    # B = 2 keeps one lane (one row is a decoder); B = 4 carries the most lanes up to
    # min(L, 3) that split the bucket evenly; ordinary and speculative programs alike
    assert {(d.batch_capacity, d.prefill_capacity, d.prompt_lanes) for d in twins} == {
        (4, 512, 2), (4, 1024, 2)
    }  # fmt: skip
    singles = {  # every width's one-lane program at those buckets has its twin
        d.name
        for d in catalog.descriptors
        if d.is_mixed and d.prompt_lanes == 1 and d.batch_capacity == 4
        and d.prefill_capacity in (512, 1024)
    }  # fmt: skip
    assert {replace(d, prompt_lanes=1).name for d in twins} == singles
    assert {d.speculation_enabled for d in twins} == {False, True}


def test_a_smaller_build_clamps_lanes_to_its_concurrency(tmp_path: Path):
    recipe, _ = _recipe(tmp_path, "qwen38", {512: 4})
    catalog = plan_catalog(recipe, LoadOptions(concurrency=2))
    assert [d.prompt_lanes for d in catalog.of_kind(GraphKind.PREFILL) if d.prompt_lanes > 1] == [
        2
    ]


@pytest.mark.parametrize(
    ("lanes", "why"),
    [
        ({320: 2}, "capacity.prompt_lanes.320' = 320: not one of capacity.prompt_buckets"),
        ({512: 0}, "capacity.prompt_lanes.512' = 0: must lie in 1..capacity.concurrency = 4"),
        ({512: 5}, "capacity.prompt_lanes.512' = 5: must lie in 1..capacity.concurrency = 4"),
        ({512: "x"}, "capacity.prompt_lanes.512' = 'x': expected int"),
        ({64: 3}, "capacity.prompt_lanes.64' = 3: must split the bucket 64 evenly"),
        ([512, 4], "capacity.prompt_lanes' = \\[512, 4\\]: expected dict"),
    ],
)
def test_a_bad_declaration_fails_in_one_line_naming_file_and_key(tmp_path: Path, lanes, why):
    with pytest.raises(RecipeError, match=why) as err:
        _recipe(tmp_path, "qwen38", lanes)
    assert str(tmp_path / "recipe.yaml") in str(err.value) and "\n" not in str(err.value)


def test_a_plan_lists_its_prompt_rows_and_the_first_is_prompt_row():
    d = Descriptor(GraphKind.PREFILL, 1, 0, 512, 512, prompt_lanes=4)

    def lane(slot: int, role: LaneRole) -> LaneWork:
        return LaneWork(RequestHandle(slot, 0), 0, role, 100, 0, 1.0, 1.0, 1, 100, 1.0)

    lanes = (lane(0, LaneRole.PROMPT), lane(1, LaneRole.DECODE), lane(2, LaneRole.PROMPT))
    plan = ScheduledPlan(d, lanes, 0, 1, 0, 1.0, 0.0, SelectionReason.ORDINARY, False, 0, 0)
    assert plan.prompt_rows == (0, 2) and plan.prompt_row == plan.prompt_rows[0]


def test_the_load_option_asks_for_lanes_and_an_empty_one_removes_the_recipes(tmp_path: Path):
    qwen = get_recipe("qwen38")
    asked = plan_catalog(qwen, LoadOptions(prompt_lanes=((512, 4),)))
    assert [d.name for d in asked.descriptors if d.prompt_lanes > 1] == [
        "prefill-b1-d0-w512-p512-l4"
    ]
    recipe, _ = _recipe(tmp_path, "qwen38", {512: 4})
    assert any(d.prompt_lanes > 1 for d in plan_catalog(recipe).descriptors)
    plain = plan_catalog(recipe, LoadOptions(prompt_lanes=()))
    assert all(d.prompt_lanes == 1 for d in plain.descriptors)


def test_the_load_option_round_trips_through_json_and_fails_in_one_line():
    options = parse_load_options({"prompt_lanes": {512: 4, "1024": 2}}, "options")
    assert options.prompt_lanes == ((512, 4), (1024, 2))
    assert parse_load_options(options.to_json(), "options") == options
    with pytest.raises(ValueError, match=r"'options.prompt_lanes' = .*L = 0 must be"):
        parse_load_options({"prompt_lanes": {512: 0}}, "options")
    with pytest.raises(CapacityError, match=r"option prompt_lanes = \{320: 2\}: needs a prepared"):
        plan_catalog(get_recipe("qwen38"), LoadOptions(prompt_lanes=((320, 2),)))
    with pytest.raises(CapacityError, match=r"option prompt_lanes = \{64: 3\}"):
        plan_catalog(get_recipe("qwen38"), LoadOptions(prompt_lanes=((64, 3),)))
