"""Capacity rules of "Speculative graph coverage" and "Mixed execution contract"."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ignition.components.batch_buckets import request_buckets
from ignition.components.capacity import (
    CapacityError,
    balanced_prompt_bucket,
    plan_catalog,
    resolve,
)
from ignition.components.program_kinds import GraphKind, ValueSource
from ignition.recipes import LoadOptions, get_recipe

QWEN = get_recipe("qwen3.8-flash")
MIXED = LoadOptions(mixed_prefill=True)


def plan(**options):
    return plan_catalog(QWEN, LoadOptions(**options))


def mixed(catalog, speculative: bool):
    return [d for d in catalog.of_kind(GraphKind.MIXED) if d.speculation_enabled == speculative]


def test_qwen_defaults_give_22_speculative_and_20_ordinary_mixed_graphs():
    counts = plan(mixed_prefill=True).counts()
    assert counts["mixed_speculative"] == 22
    assert counts["mixed_ordinary"] == 20


def test_wider_width_prompt_bucket_is_512():
    wider = [d for d in mixed(plan(mixed_prefill=True), True) if d.token_capacity > 1]
    assert wider
    assert {d.prefill_capacity for d in wider} == {512}


def test_balanced_bucket_minimises_worst_multiplicative_distance():
    assert balanced_prompt_bucket([64, 128, 256, 512, 768, 1024, 1536, 2048, 3072, 4096]) == 512
    assert balanced_prompt_bucket([64, 128, 256, 512, 768, 1024]) == 256


def test_balanced_bucket_ties_go_to_the_smaller():
    # 128: max(2, 2) = 2 and 256 would be max(4, 1) = 4; 64 and 256 tie at 4 against 128.
    assert balanced_prompt_bucket([64, 256]) == 64
    assert balanced_prompt_bucket([64, 128, 256]) == 128


def test_prefill_shapes_one_per_prompt_bucket():
    prefills = plan().of_kind(GraphKind.PREFILL)
    assert [d.token_capacity for d in prefills] == list(QWEN.capacity.prompt_buckets)
    assert all(d.prefill_capacity == 0 for d in prefills)


def test_decode_shapes_are_power_of_two_buckets_through_padded_concurrency():
    assert [d.batch_capacity for d in plan().of_kind(GraphKind.DECODE)] == [1, 2, 4]
    assert [d.batch_capacity for d in plan(concurrency=3).of_kind(GraphKind.DECODE)] == [1, 2, 4]
    assert [d.batch_capacity for d in plan(concurrency=1).of_kind(GraphKind.DECODE)] == [1]


def test_request_buckets_start_at_the_minimum():
    assert request_buckets(64, minimum=2) == [2, 4, 8, 16, 32, 64]
    assert request_buckets(1, minimum=2) == []


def test_width_one_speculative_programs_at_every_request_bucket():
    spec = plan().of_kind(GraphKind.SPECULATIVE)
    width_one = [d for d in spec if d.token_capacity == 1]
    assert [d.batch_capacity for d in width_one] == [1, 2, 4]
    assert all(d.proposal_depth == 0 and d.packed_capacity == d.batch_capacity for d in width_one)


def test_rectangular_programs_fit_the_envelope_and_declare_all_four_extents():
    rect = [
        d
        for d in plan().of_kind(GraphKind.SPECULATIVE)
        if d.token_capacity > 1 and d.value_source is ValueSource.QUERY_LENGTH
    ]
    assert {(d.batch_capacity, d.token_capacity) for d in rect} == {
        (1, 2),
        (1, 3),
        (1, 4),
        (1, 5),
        (1, 6),
        (2, 2),
        (2, 3),
    }
    for d in rect:
        assert d.packed_capacity == d.batch_capacity * d.token_capacity <= 6
        assert d.token_capacity <= d.proposal_depth + 1


def test_ragged_programs_are_device_allocated_and_adaptive_only():
    adaptive = [d for d in plan().of_kind(GraphKind.SPECULATIVE) if d.is_device_allocated]
    assert adaptive
    for d in adaptive:
        assert d.packed_capacity <= 6
        assert d.packed_capacity < d.batch_capacity * d.token_capacity
        assert d.confidence_width == d.proposal_depth > 0
    fixed = plan(speculation="fixed").of_kind(GraphKind.SPECULATIVE)
    assert fixed and not any(d.is_device_allocated for d in fixed)


def test_speculation_off_prepares_no_speculative_programs():
    catalog = plan(mixed_prefill=True, speculation="off")
    assert catalog.counts()["speculative"] == 0
    assert catalog.counts()["mixed_speculative"] == 0
    assert catalog.counts()["mixed_ordinary"] == 20


def test_mixed_batch_buckets_have_at_least_two_rows():
    assert {d.batch_capacity for d in plan(mixed_prefill=True).of_kind(GraphKind.MIXED)} == {2, 4}


def test_every_prompt_bucket_appears_at_width_one_in_both_catalogs():
    catalog = plan(mixed_prefill=True)
    for speculative in (True, False):
        for b in (2, 4):
            widths_one = [
                d.prefill_capacity
                for d in mixed(catalog, speculative)
                if d.batch_capacity == b and d.token_capacity == 1
            ]
            assert widths_one == list(QWEN.capacity.prompt_buckets)


def test_ordinary_mixed_graphs_keep_no_draft_state():
    for d in mixed(plan(mixed_prefill=True), False):
        assert d.token_capacity == 1 and d.proposal_depth == 0 and not d.speculation_enabled


def test_mixed_wider_widths_respect_the_target_token_envelope():
    catalog = plan(mixed_prefill=True)
    wider = [
        (d.batch_capacity, d.token_capacity) for d in mixed(catalog, True) if d.token_capacity > 1
    ]
    assert sorted(wider) == [(2, 2), (2, 3)]


def test_mixed_widths_are_bounded_by_completion_token_capacity():
    import dataclasses

    recipe = dataclasses.replace(
        QWEN, capacity=dataclasses.replace(QWEN.capacity, completion_token_capacity=2)
    )
    catalog = plan_catalog(recipe, MIXED)
    assert max(d.token_capacity for d in catalog.of_kind(GraphKind.MIXED)) == 2
    assert max(d.token_capacity for d in catalog.of_kind(GraphKind.SPECULATIVE)) == 2


def test_mixed_shape_reports_maximum_packed_extent():
    for d in plan(mixed_prefill=True).of_kind(GraphKind.MIXED):
        expected = d.prefill_capacity + (d.batch_capacity - 1) * d.token_capacity
        assert d.max_packed_extent == expected
        assert d.prefill_capacity % 64 == 0 and d.prefill_capacity >= d.token_capacity
    assert plan(mixed_prefill=True).max_packed_extent() == 4096 + 3


def test_concurrency_one_gives_no_mixed_graphs():
    counts = plan(mixed_prefill=True, concurrency=1).counts()
    assert counts["mixed_speculative"] == 0 and counts["mixed_ordinary"] == 0


def test_envelope_below_two_gives_no_wider_widths():
    catalog = plan(mixed_prefill=True, speculative_token_capacity=1)
    assert all(d.token_capacity == 1 for d in catalog.of_kind(GraphKind.SPECULATIVE))
    assert all(d.token_capacity == 1 for d in catalog.of_kind(GraphKind.MIXED))
    assert catalog.counts()["mixed_speculative"] == 20


def test_zero_draft_tokens_selects_the_ordinary_catalog():
    counts = plan(mixed_prefill=True, num_draft_tokens=0).counts()
    assert counts["speculative"] == 0
    assert counts["mixed_speculative"] == 0
    assert counts["mixed_ordinary"] == 20


def test_fewer_draft_tokens_narrow_the_widths():
    catalog = plan(mixed_prefill=True, num_draft_tokens=1)
    assert max(d.token_capacity for d in catalog.of_kind(GraphKind.SPECULATIVE)) == 2
    assert catalog.counts()["mixed_speculative"] == 21


def test_chunk_cap_removes_larger_buckets_and_moves_the_balanced_bucket():
    catalog = plan(mixed_prefill=True, max_prefill_chunk=1024)
    assert [d.token_capacity for d in catalog.of_kind(GraphKind.PREFILL)] == [
        64,
        128,
        256,
        512,
        768,
        1024,
    ]
    counts = catalog.counts()
    assert counts["mixed_ordinary"] == 12
    assert counts["mixed_speculative"] == 14
    wider = {d.prefill_capacity for d in mixed(catalog, True) if d.token_capacity > 1}
    assert wider == {256}


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"concurrency": 65}, "--concurrency = 65: exceeds what the recipe prepares (64)"),
        ({"concurrency": 0}, "--concurrency = 0: must be at least 1"),
        ({"speculative_token_capacity": 385}, "--speculative-token-capacity = 385"),
        ({"num_draft_tokens": 6}, "--num-draft-tokens = 6"),
        ({"max_prefill_chunk": 8192}, "--max-prefill-chunk = 8192: not a prepared prompt bucket"),
        ({"max_prefill_chunk": 1000}, "--max-prefill-chunk = 1000"),
    ],
)
def test_options_can_only_reduce_to_programs_that_exist(options, fragment):
    with pytest.raises(CapacityError) as info:
        resolve(QWEN, LoadOptions(**options))
    assert fragment in str(info.value)
    assert "qwen38" in str(info.value)


def test_mixed_prefill_needs_a_recipe_that_declares_mixed_capture():
    with pytest.raises(CapacityError, match="does not declare mixed capture"):
        resolve(get_recipe("llama32"), MIXED)


def test_speculation_cannot_exceed_the_recipe_mode():
    with pytest.raises(CapacityError, match="--speculation = fixed"):
        resolve(get_recipe("llama32"), LoadOptions(speculation="fixed"))


def test_dense_recipe_has_only_prefill_and_decode():
    counts = plan_catalog(get_recipe("llama32")).counts()
    assert counts["prefill"] == 6 and counts["decode"] == 4
    assert counts["speculative"] == counts["mixed_speculative"] == counts["mixed_ordinary"] == 0


@settings(max_examples=60, deadline=None)
@given(
    concurrency=st.integers(1, 4),
    envelope=st.integers(1, 6),
    drafts=st.integers(0, 5),
    chunk=st.sampled_from(QWEN.capacity.prompt_buckets),
    speculation=st.sampled_from(["off", "fixed", "adaptive"]),
)
def test_every_option_combination_follows_the_rules(
    concurrency, envelope, drafts, chunk, speculation
):
    catalog = plan(
        mixed_prefill=True,
        concurrency=concurrency,
        speculative_token_capacity=envelope,
        num_draft_tokens=drafts,
        max_prefill_chunk=chunk,
        speculation=speculation,
    )
    buckets = [b for b in QWEN.capacity.prompt_buckets if b <= chunk]
    batch = [b for b in (2, 4) if b <= 1 << (concurrency - 1).bit_length()]
    active = speculation != "off" and drafts > 0
    widest = min(drafts + 1, 8)
    counts = catalog.counts()
    assert counts["prefill"] == len(buckets)
    assert counts["mixed_ordinary"] == len(batch) * len(buckets)
    wider = sum(1 for b in batch for w in range(2, widest + 1) if b * w <= envelope)
    assert counts["mixed_speculative"] == (len(batch) * len(buckets) + wider if active else 0)
    for d in catalog.descriptors:
        assert d.packed_capacity <= d.batch_capacity * d.token_capacity
        if d.kind is GraphKind.SPECULATIVE and d.token_capacity > 1:
            assert d.packed_capacity <= envelope
            assert d.token_capacity <= drafts + 1
            assert d.is_device_allocated == (
                d.packed_capacity < d.batch_capacity * d.token_capacity
            )
            assert speculation == "adaptive" or not d.is_device_allocated


def test_runtime_selection_keeps_the_variant_matching_the_decode_mode():
    from ignition.components.mode_selection import select_for_mode

    catalog = plan(mixed_prefill=True)
    off = select_for_mode(catalog, "off")
    assert {d.kind for d in off.descriptors} == {
        GraphKind.PREFILL,
        GraphKind.DECODE,
        GraphKind.MIXED,
    }
    assert not any(d.speculation_enabled for d in off.descriptors)
    fixed = select_for_mode(catalog, "fixed")
    assert GraphKind.DECODE not in {d.kind for d in fixed.descriptors}
    assert all(d.speculation_enabled for d in fixed.descriptors if d.kind is GraphKind.MIXED)
    assert not any(d.is_device_allocated for d in fixed.descriptors)
    adaptive = select_for_mode(catalog, "adaptive", mixed=False)
    assert any(d.is_device_allocated for d in adaptive.descriptors)
    assert GraphKind.MIXED not in {d.kind for d in adaptive.descriptors}


def test_runtime_selection_needs_decode_programs():
    from ignition.components.mode_selection import select_for_mode

    with pytest.raises(CapacityError, match="no decode programs"):
        select_for_mode(plan(speculation="off"), "fixed")
