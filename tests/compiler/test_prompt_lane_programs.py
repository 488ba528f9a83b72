"""Multi-lane prompt programs (issue 39) are prepared like every other program.

A prefill program of four lanes and an ordinary mixed one of two lanes (the embedded
default, reference kernels) run once on validation inputs with every lane carrying a chunk,
free of host syncs (a captured graph could not contain one); each lane commits its chunk.
The workspace's per-lane tables are the only bytes the lanes add to the shared inputs, and a
speculative round, whose prompt staging is one chunk, is refused with lanes.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from ignition.compiler.build import DEFAULT_CHECKPOINT, _sample_tokens, _validation_state
from ignition.compiler.graph import prepare_programs
from ignition.compiler.host_sync import HostSyncDetector
from ignition.compiler.programs import ProgramError, check_buildable
from ignition.compiler.validate import validate_program
from ignition.compiler.workspace import WorkspaceExtents, lane_table_bytes
from ignition.components.capacity import plan_catalog
from ignition.components.catalog import Descriptor, GraphKind, ValueSource
from ignition.kernels import use_backend
from ignition.model.weights import load_model
from ignition.recipes import LoadOptions, get_recipe

OPTIONS = LoadOptions(
    mixed_prefill=True, speculation="off", max_prefill_chunk=256, prompt_lanes=((256, 4),)
)
CATALOG = plan_catalog(get_recipe("qwen38"), OPTIONS)
LANES = [d for d in CATALOG.descriptors if d.prompt_lanes > 1]


def test_the_catalog_has_a_four_lane_prefill_and_a_two_lane_mixed_program():
    assert {(d.kind, d.prompt_lanes, d.row_capacity) for d in LANES} == {
        (GraphKind.PREFILL, 4, 4),
        (GraphKind.MIXED, 2, 4),
    }
    assert WorkspaceExtents.of(CATALOG.descriptors).max_lanes == 4


@pytest.fixture(scope="module")
def prepared():
    recipe = get_recipe("qwen38")
    model = load_model(DEFAULT_CHECKPOINT, torch.device("cpu"))
    with use_backend("reference"):
        state = _validation_state(model, recipe.capacity.kv_page_size, LANES, "cpu")
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
    assert result.num_tokens == 32 * lanes + decoders  # validation checks each row's length


def _detected(fn, inputs, name: str):
    with HostSyncDetector(name):
        return fn(inputs)


def test_the_lanes_add_only_their_tables_to_the_workspace():
    assert lane_table_bytes(1) == 0
    # prompt row, next token, history begin, replay start, 300 bias ids and values, 64 stops
    assert lane_table_bytes(4) == 3 * (4 + 8 + 4 + 4 + 300 * 8 + 300 * 4 + 64 * 8)


def test_a_speculative_round_with_lanes_is_refused(prepared):
    model = prepared[0]
    spec = Descriptor(
        GraphKind.MIXED, 4, 0, 1, 4, 256, 0, True, ValueSource.QUERY_LENGTH, prompt_lanes=2
    )
    with pytest.raises(ProgramError, match="a speculative round carries one prompt lane"):
        check_buildable(spec, model)
    check_buildable(dataclasses.replace(spec, prompt_lanes=1), model)
