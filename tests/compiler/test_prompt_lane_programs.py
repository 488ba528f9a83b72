"""Multi-lane prompt programs (issue 39) are prepared like every other program.

A prefill program of four lanes, an ordinary mixed one of two lanes and speculative mixed
ones of two lanes (the embedded default, reference kernels) run once on validation inputs
with every lane carrying a chunk, free of host syncs (a captured graph could not contain
one); each lane commits its chunk. The workspace's per-lane tables are the only bytes the
lanes add to the shared inputs.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from ignition.compiler.buffers import WorkspaceExtents, lane_table_bytes
from ignition.compiler.build import DEFAULT_CHECKPOINT, _sample_tokens
from ignition.compiler.build_validation import validation_state
from ignition.compiler.graph import prepare_programs
from ignition.compiler.host_sync import HostSyncDetector
from ignition.compiler.validate import validate_program
from ignition.components.capacity import plan_catalog
from ignition.components.program_kinds import GraphKind
from ignition.kernels import use_backend
from ignition.model.weights import load_model
from ignition.recipes import LoadOptions, get_recipe

OPTIONS = LoadOptions(
    mixed_prefill=True, speculation="off", max_prefill_chunk=256, prompt_lanes=((256, 4),)
)
CATALOG = plan_catalog(get_recipe("qwen38"), OPTIONS)
SPECULATIVE = plan_catalog(
    get_recipe("qwen38"),
    dataclasses.replace(
        OPTIONS,
        speculation="adaptive",
        speculative_token_capacity=8,
        mixed_wide_prompt_buckets=(256,),
    ),
)
SPEC_LANES = [d for d in SPECULATIVE.descriptors if d.prompt_lanes > 1 and d.speculation_enabled]
LANES = [d for d in CATALOG.descriptors if d.prompt_lanes > 1] + SPEC_LANES


def test_the_catalog_has_a_four_lane_prefill_and_a_two_lane_mixed_program():
    assert {(d.kind, d.prompt_lanes, d.row_capacity) for d in LANES} == {
        (GraphKind.PREFILL, 4, 4),
        (GraphKind.MIXED, 2, 4),
    }
    assert WorkspaceExtents.of(CATALOG.descriptors).max_lanes == 4


def test_speculative_mixed_programs_carry_min_l_b_minus_one_lanes():
    """Every speculative mixed program at the four-lane bucket (B = 4 in a 4-slot build)
    also comes with 2 lanes (min(4, B - 1) = 3 does not split 256; 2 does): width one and
    the wider widths the build declares at that bucket."""
    assert SPEC_LANES and all(d.kind is GraphKind.MIXED for d in SPEC_LANES)
    assert {(d.batch_capacity, d.prompt_lanes) for d in SPEC_LANES} == {(4, 2)}
    widths = {d.token_capacity for d in SPEC_LANES}
    assert 1 in widths and len(widths) > 1


@pytest.fixture(scope="module")
def prepared():
    recipe = get_recipe("qwen38")
    model = load_model(DEFAULT_CHECKPOINT, torch.device("cpu"))
    with use_backend("reference"):
        state = validation_state(model, recipe.capacity.kv_page_size, LANES, "cpu")
        programs, pending = prepare_programs(model, state, LANES, torch.device("cpu"))
    return model, state, programs, pending, _sample_tokens(DEFAULT_CHECKPOINT)


@pytest.mark.parametrize("name", [d.name for d in LANES])
def test_every_lane_commits_its_chunk_without_a_host_sync(prepared, name):
    model, state, programs, pending, sample = prepared
    program, prepared_program = programs[name]
    fn = prepared_program.fn
    prepared_program.fn = lambda inputs: _detected(fn, inputs, name)
    lanes = program.descriptor.prompt_lanes
    with torch.no_grad(), use_backend("reference"):
        result = validate_program(
            program, prepared_program, state, pending, sample, model.config.vocab_size, 32
        )
    decoders = program.descriptor.row_capacity - lanes
    # validation checks each row's length; a wider round's decoders emit 1..W tokens each
    emitted = result.num_tokens - 32 * lanes
    assert decoders <= emitted <= decoders * program.descriptor.token_capacity


def _detected(fn, inputs, name: str):
    with HostSyncDetector(name):
        return fn(inputs)


def test_the_lanes_add_only_their_tables_to_the_workspace():
    assert lane_table_bytes(1) == 0
    # prompt row, next token, prompt length (speculative rounds), history begin, replay
    # start, 300 bias ids and values, 64 stops
    assert lane_table_bytes(4) == 3 * (4 + 8 + 4 + 4 + 4 + 300 * 8 + 300 * 4 + 64 * 8)
