"""Running every prepared program once on real inputs, and the state they run over."""

from __future__ import annotations

from typing import Any

import torch

from ignition.compiler.graph import GraphCapturer, prepare_programs
from ignition.compiler.state_ops import StateOperations
from ignition.compiler.validate import validate_program, validate_state_operations
from ignition.components.program_kinds import GraphKind
from ignition.model.state import ModelState


def validation_state(
    model, page_size: int, descriptors, device, index_keys: torch.dtype | None = None
) -> ModelState:
    """Slots for the widest program (at least two, for state operations), each with room for
    the largest packed extent plus one round's lookahead, and the scratch page at the end;
    ``index_keys``: the storage of QSA's index keys (None: the model's dtype)."""
    descriptors = [d for d in descriptors if d.kind is not GraphKind.VISION]
    num_slots = max(2, max((d.row_capacity for d in descriptors), default=1))
    max_tokens = max(
        (d.max_packed_extent + d.token_capacity + d.proposal_depth + 1 for d in descriptors),
        default=page_size,
    )
    per_slot = -(-max_tokens // page_size)
    return ModelState.allocate(
        model.config,
        num_slots,
        per_slot * num_slots + 1,
        page_size,
        per_slot,
        device=device,
        dtype=next(model.parameters()).dtype,
        index_key_dtype=index_keys,
    )


def prepare_and_validate(
    model, page_size: int, todo, sample: list[int], device, on_program, ple_rows=None,
    index_keys: torch.dtype | None = None,
):  # fmt: skip
    state = validation_state(model, page_size, todo, device, index_keys)
    results: dict[str, dict[str, Any]] = {}
    bind = None if ple_rows is None else ple_rows.before_capture(model, device)
    programs, pending = prepare_programs(model, state, todo, device, before_capture=bind)
    if ple_rows is not None:
        ple_rows.attach(model, device, [program for program, _ in programs.values()])
    try:
        _validate_all(programs, pending, state, sample, model, todo, on_program, results)
    finally:
        if ple_rows is not None:
            ple_rows.close()
    return results


def _validate_all(programs, pending, state, sample, model, todo, on_program, results) -> None:
    for d in todo:
        program, prepared = programs[d.name]
        result = validate_program(
            program, prepared, state, pending, sample, model.config.vocab_size
        )
        results[d.name] = {
            "name": d.name,
            **d.to_json(),
            "validation_ns": result.validation_ns,
            "capture_bytes": prepared.capture_bytes,
        }
        if on_program is not None:
            on_program(d, False)


def check_state_operations(
    model, page_size: int, device, index_keys: torch.dtype | None = None
) -> list[dict[str, Any]]:
    """Snapshot, restore and init over a small state, each checked."""
    state = validation_state(model, page_size, (), device, index_keys)
    ops = StateOperations(state, num_rows=1, capturer=GraphCapturer(device))
    prepared = {p.name: p for p in ops.programs.values()}
    return [
        {
            "name": result.name,
            "validation_ns": result.validation_ns,
            "capture_bytes": prepared[result.name].capture_bytes,
        }
        for result in validate_state_operations(ops)
    ]
