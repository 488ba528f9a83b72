"""Every prepared program of the embedded default's full catalog is free of host syncs.

Issue 16: a captured graph cannot contain host reads, data-dependent shapes or host data.
The catalog is the one `ignition build --mixed-prefill` prepares for the embedded checkpoint
(speculation adaptive, every kind and bucket); each program runs once on validation inputs
(every row active) under the detector. The prompt row carries 64 tokens rather than its full
capacity: shapes are static, so the operations a program issues do not depend on how many
tokens are active (a dependence would itself be a violation), and the reference kernels'
work stays small.
"""

from __future__ import annotations

import os

import pytest
import torch

from ignition.compiler.build import DEFAULT_CHECKPOINT, _sample_tokens
from ignition.compiler.build_validation import validation_state
from ignition.compiler.graph import prepare_programs
from ignition.compiler.host_sync import HostSyncDetector
from ignition.compiler.validate import validate_program
from ignition.components.capacity import plan_catalog
from ignition.model.weights import load_model
from ignition.recipes import LoadOptions, get_recipe

if not torch.cuda.is_available():
    # Triton reads this when a kernel module is first imported (lazily, at first use), so the
    # Triton-kernel programs below run through the interpreter on CPU.
    os.environ.setdefault("TRITON_INTERPRET", "1")

CATALOG = plan_catalog(get_recipe("qwen38"), LoadOptions(mixed_prefill=True))
PROMPT_TOKENS = 64


@pytest.fixture(scope="module")
def prepared():
    recipe = get_recipe("qwen38")
    model = load_model(DEFAULT_CHECKPOINT, torch.device("cpu"))
    state = validation_state(model, recipe.capacity.kv_page_size, CATALOG.descriptors, "cpu")
    programs, pending = prepare_programs(model, state, CATALOG.descriptors, torch.device("cpu"))
    return model, state, programs, pending, _sample_tokens(DEFAULT_CHECKPOINT)


def _under_detector(prepared_program, name: str):
    fn = prepared_program.fn

    def detected(inputs):
        with HostSyncDetector(name):
            return fn(inputs)

    prepared_program.fn = detected


def test_the_catalog_is_the_full_mixed_prefill_adaptive_one():
    assert CATALOG.counts() == {
        "prefill": 10,
        "decode": 3,
        "speculative": 12,
        "mixed_speculative": 22,
        "mixed_ordinary": 20,
        "vision": 0,
    }


@pytest.mark.parametrize("name", [d.name for d in CATALOG.descriptors])
def test_every_prepared_program_runs_without_a_host_sync(prepared, name):
    model, state, programs, pending, sample = prepared
    program, prepared_program = programs[name]
    _under_detector(prepared_program, name)
    with torch.no_grad():
        validate_program(
            program,
            prepared_program,
            state,
            pending,
            sample,
            model.config.vocab_size,
            max_prompt_tokens=PROMPT_TOKENS,
        )


def test_snapshot_restore_and_init_run_without_a_host_sync(prepared):
    from ignition.compiler.graph import GraphCapturer
    from ignition.compiler.state_ops import StateOperations
    from ignition.compiler.validate import validate_state_operations

    _, state, _, _, _ = prepared
    ops = StateOperations(state, num_rows=1, capturer=GraphCapturer("cpu"))
    _under_detector(ops.snapshot_program, "snapshot")
    _under_detector(ops.restore_program, "restore")
    _under_detector(ops.init_program, "init")
    with torch.no_grad():
        validate_state_operations(ops)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    ["decode-b4-d0-w1-p4", "speculative-spec-b4-d2-w3-p6-dev", "mixed-spec-b4-d0-w1-p4-c64"],
)
def test_programs_on_the_triton_kernels_run_without_a_host_sync(prepared, name):
    """The Triton launchers (what a GPU runs instead of the exempt CPU references) issue no
    host sync either: one program per path, its kernels interpreted on CPU."""
    from ignition.kernels import use_backend

    model, state, programs, pending, sample = prepared
    program, prepared_program = programs[name]
    _under_detector(prepared_program, name)
    with torch.no_grad(), use_backend("triton"):
        validate_program(
            program,
            prepared_program,
            state,
            pending,
            sample,
            model.config.vocab_size,
            max_prompt_tokens=16,
        )
