"""Validate each prepared program by running it once on real inputs, every row active:
emitted tokens lie in the vocabulary and lengths advance by exactly what was committed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch

from ignition.compiler.graph import PreparedProgram, timed_run
from ignition.compiler.programs import Program
from ignition.compiler.staging import HostFrame, stage_prompt_chunk
from ignition.compiler.vision_program import (
    VALIDATION_TOLERANCE,
    VisionProgramInputs,
    bind_images,
    validation_grid,
)
from ignition.compiler.workspace import RoundProgramInputs, clear_inputs
from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.model.state import PAGED_FIELDS, ModelState


class ValidationError(RuntimeError):
    """A prepared program produced outputs that break its contract."""


@dataclass(frozen=True)
class ValidationResult:
    name: str
    validation_ns: int
    num_tokens: int


def _prompt_tokens(sample: Sequence[int], n: int) -> list[int]:
    return [sample[i % len(sample)] for i in range(n)]


def _prompt_capacity(d: Descriptor) -> int:
    return d.token_capacity if d.kind is GraphKind.PREFILL else d.prefill_capacity


def validate_program(
    program: Program,
    prepared: PreparedProgram,
    state: ModelState,
    pending: torch.Tensor,
    sample_tokens: Sequence[int],
    vocab_size: int,
    max_prompt_tokens: int | None = None,
) -> ValidationResult:
    """Run ``program`` once with every row active and every prompt lane carrying a chunk
    (capped at ``max_prompt_tokens``; shapes stay static)."""
    d = program.descriptor
    if isinstance(program.inputs, VisionProgramInputs):
        return validate_vision_program(program, prepared)
    if not sample_tokens:
        raise ValidationError("validation needs a non-empty sample of real tokens")
    if d.row_capacity > state.num_slots:
        raise ValidationError(f"{d.name}: {d.row_capacity} rows exceed validation slots")
    frame = program.stage()
    rows = list(range(d.row_capacity))
    prompt_rows = list(range(d.prompt_lanes)) if _prompt_capacity(d) else []
    capacity_tokens = state.capacity_tokens
    for slot in rows:
        state.reset_slot(slot)
        per_slot = state.max_pages_per_slot
        state.assign_pages(slot, list(range(slot * per_slot, (slot + 1) * per_slot)))
        pending[slot] = sample_tokens[slot % len(sample_tokens)]
    expected_prompt, offset = 0, 0
    if prompt_rows:
        lane_capacity = _prompt_capacity(d) // d.prompt_lanes
        expected_prompt = min(lane_capacity, capacity_tokens - d.token_capacity)
        if max_prompt_tokens is not None:
            expected_prompt = min(expected_prompt, max_prompt_tokens)
        chunk = _prompt_tokens(sample_tokens, expected_prompt)
        for lane in prompt_rows:
            offset += _bind_prompt(program, frame, lane, offset, chunk)
    for row in rows:
        if row in prompt_rows:
            continue
        offset += _bind_decode(program, frame, row, offset, d.token_capacity)
    program.upload(frame)
    outputs, interval_ns = timed_run(prepared)
    emitted = _check_outputs(d, program, outputs, prompt_rows, vocab_size)
    lengths = state.seq_lens[: len(rows)].tolist()
    for row in rows:
        committed = expected_prompt if row in prompt_rows else emitted[row]
        if lengths[row] != committed:
            raise ValidationError(
                f"{d.name} row {row}: state length {lengths[row]} after committing {committed}"
            )
    for slot in rows:
        state.reset_slot(slot)
    clear_inputs(program.inputs)
    return ValidationResult(d.name, interval_ns, expected_prompt * len(prompt_rows) + sum(emitted))


def _bind_prompt(
    program: Program, frame: HostFrame, lane: int, offset: int, chunk: list[int]
) -> int:
    """Prompt lane ``lane`` is row and slot ``lane`` with a full chunk; returns its tokens."""
    frame["slot_ids"][lane] = lane
    frame["prefill_row"][lane] = lane
    is_round = isinstance(program.inputs, RoundProgramInputs)
    capacity = program.descriptor.lane_capacity
    return stage_prompt_chunk(frame, capacity, is_round, lane, lane, offset, chunk)


def _bind_decode(program: Program, frame: HostFrame, row: int, offset: int, width: int) -> int:
    """A decode / verify row at full width in slot ``row``; returns its packed tokens."""
    frame["is_decode_row"][row] = True
    frame["slot_ids"][row] = row
    x = program.inputs
    if isinstance(x, RoundProgramInputs):
        if x.round.query_lens is not None:
            decode_rows = x.round.slot_ids.shape[0] - (1 if x.round.prompt is not None else 0)
            budget = program.descriptor.packed_capacity // max(1, decode_rows)
            frame["query_lens"][row] = max(1, min(width, budget))
        if x.round.lane_ceilings is not None:
            frame["lane_ceilings"][row] = width
        return 0
    frame["query_lens"][row] = width
    return width


def _check_outputs(
    d: Descriptor, program: Program, outputs, prompt_rows: list[int], vocab_size: int
) -> list[int]:
    """Tokens emitted per row; raises on out-of-vocabulary or missing tokens."""
    if program.is_round:
        tokens = outputs.output_tokens.tolist()
        emitted = [sum(1 for t in row if t >= 0) for row in tokens]
        flat = [t for row in tokens for t in row if t >= 0]
    else:
        tokens = outputs.next_tokens.tolist()
        emitted = [1 if t >= 0 else 0 for t in tokens]
        flat = [t for t in tokens if t >= 0]
    bad = [t for t in flat if not 0 <= t < vocab_size]
    if bad:
        raise ValidationError(f"{d.name}: emitted token ids {bad[:4]} outside [0, {vocab_size})")
    for row, count in enumerate(emitted):
        if row not in prompt_rows and count == 0:
            raise ValidationError(f"{d.name} row {row}: an active decode row emitted nothing")
    for row in prompt_rows:
        emitted[row] = 0
    return emitted


def validate_vision_program(program: Program, prepared: PreparedProgram) -> ValidationResult:
    """Encode a capacity-filling synthetic image and compare with the eager encoder."""
    d = program.descriptor
    encoder = program.fn.encoder
    grid = validation_grid(d, encoder)
    x = program.inputs
    generator = torch.Generator().manual_seed(0)
    pixels = torch.randn(grid.num_patches, x.pixels.shape[1], generator=generator).to(x.pixels)
    num_features = bind_images(x, encoder, [pixels], [grid])
    outputs, interval_ns = timed_run(prepared)
    got = outputs.features[:num_features].float()
    with torch.no_grad():
        expected = encoder(pixels, [grid]).float()
    if not torch.isfinite(got).all():
        raise ValidationError(f"{d.name}: vision features are not finite")
    error = (got - expected).abs().max().item()
    scale = max(1.0, expected.abs().max().item())
    if error > VALIDATION_TOLERANCE * scale:
        raise ValidationError(
            f"{d.name}: prepared features differ from the eager encoder by {error:.3g}"
        )
    clear_inputs(x)
    return ValidationResult(d.name, interval_ns, grid.num_patches)


def validate_state_operations(ops) -> list[ValidationResult]:
    """Snapshot slot 0 holding random state, restore it into slot 1, and compare them;
    then initialize slot 1 and compare the whole state with a reset_slot'ed copy."""
    state = ops.state
    if state.num_slots < 2:
        raise ValidationError("state operations need two validation slots")
    per_slot = state.max_pages_per_slot
    state.assign_pages(0, list(range(0, per_slot)))
    state.assign_pages(1, list(range(per_slot, 2 * per_slot)))
    length = per_slot * state.page_size - 1  # every page, the last one partial
    state.seq_lens[0] = length
    generator = torch.Generator().manual_seed(0)
    pages = torch.arange(per_slot, device=state.seq_lens.device)
    caches = [c for name in PAGED_FIELDS if (c := getattr(state, name)).numel()]
    pieces = list(state.slot_rows(0).values())
    pieces += [cache[:, :per_slot] for cache in caches]
    for piece in pieces:
        piece.copy_(torch.randn(piece.shape, generator=generator).to(piece))
    expected = [piece.clone() for piece in pieces]
    snapshot_ns = ops.snapshot(slot=0, row=0)
    state.reset_slot(0)
    for cache in caches:
        cache[:, :per_slot].zero_()
    restore_ns = ops.restore(slot=1, row=0)
    restored = list(state.slot_rows(1).values())
    restored += [cache[:, pages + per_slot] for cache in caches]
    if int(state.seq_lens[1]) != length or not all(
        torch.equal(got, want) for got, want in zip(restored, expected, strict=True)
    ):
        raise ValidationError("restore did not reproduce the snapshotted slot")
    init_ns = _validate_init(ops, generator)
    for slot in (0, 1):
        state.reset_slot(slot)
    return [
        ValidationResult(ops.snapshot_program.name, snapshot_ns, 0),
        ValidationResult(ops.restore_program.name, restore_ns, 0),
        ValidationResult(ops.init_program.name, init_ns, 0),
    ]


def _state_tensors(state: ModelState) -> dict[str, torch.Tensor]:
    return {
        f.name: getattr(state, f.name)
        for f in fields(state)
        if isinstance(getattr(state, f.name), torch.Tensor)
    }


def _validate_init(ops, generator: torch.Generator) -> int:
    """Initializing slot 1 of a random state must leave it exactly as ``reset_slot(1)``
    leaves a copy (slot 0 and cache pages untouched)."""
    state = ops.state
    for slot in (0, 1):
        state.seq_lens[slot] = 1 + int(
            torch.randint(state.capacity_tokens, (1,), generator=generator)
        )
        for piece in state.slot_rows(slot).values():
            piece.copy_(torch.randn(piece.shape, generator=generator).to(piece))
    tensors = _state_tensors(state)
    before = {name: t.clone() for name, t in tensors.items()}
    state.reset_slot(1)
    expected = {name: t.clone() for name, t in tensors.items()}
    for name, t in tensors.items():
        t.copy_(before[name])
    init_ns = ops.initialize(slot=1)
    wrong = [name for name, t in tensors.items() if not torch.equal(t, expected[name])]
    if wrong:
        raise ValidationError(
            f"{ops.init_program.name}: initializing slot 1 left {', '.join(wrong)} "
            "unlike reset_slot"
        )
    return init_ns
