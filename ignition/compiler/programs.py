"""One program builder per descriptor kind, over shared typed workspaces.

Every program reads decode rows' pending tokens from the device ``pending`` buffer (so a
second frame can queue before the first's outputs reach the host) and writes each row's last
token back to it. Padding rows write only the scratch row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ignition.compiler.buffers import Uploads
from ignition.compiler.ple_input import PleRowsInput
from ignition.compiler.staging import HostFrame, HostStaging
from ignition.compiler.vision_program import build_vision_program, check_vision_buildable
from ignition.compiler.workspace import (
    ProgramInputs,
    RoundProgramInputs,
    StepProgramInputs,
    StepProgramOutputs,
    Workspace,
)
from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.model.logits_processing import SlotHistory
from ignition.model.model import HybridModel
from ignition.model.packing import PackedCapacity, PackedInputs, gather_rows
from ignition.model.speculative import (
    PromptChunk,
    RoundCapacity,
    RoundOutputs,
    speculative_round,
)
from ignition.model.state import ModelState
from ignition.model.step import run_step


class ProgramError(ValueError):
    """A descriptor this model cannot build."""


@dataclass
class Program:
    """What the worker needs to drive one prepared program."""

    descriptor: Descriptor
    inputs: ProgramInputs
    fn: Callable[[Any], Any]
    uploads: Uploads  # the workspace prefixes ``inputs`` views: what a frame uploads
    staging: HostStaging
    # Per-slot sampling history the program reads and counts into (shared by all programs).
    history: SlotHistory | None = None
    # Prompt-lane programs: the chunk's final-normed hidden [prefill_capacity, hidden], shared.
    prompt_hidden: Tensor | None = None

    @property
    def is_round(self) -> bool:
        return isinstance(self.inputs, RoundProgramInputs)

    def stage(self) -> HostFrame:
        """Host staging for one frame, reset to padding (no device work)."""
        return self.staging.begin(self.uploads)

    def upload(self, frame: HostFrame) -> None:
        """One stream-ordered copy per bound buffer."""
        self.staging.upload(frame)


def _gather_pending(pending: Tensor, slot_ids: Tensor, scratch_row: int) -> Tensor:
    rows = torch.where(slot_ids >= 0, slot_ids.long(), scratch_row)
    return pending[rows]


def _store_pending(pending: Tensor, slot_ids: Tensor, tokens: Tensor, scratch_row: int) -> None:
    """pending[slot] = token for rows that emitted one; everything else hits the scratch row."""
    rows = torch.where((slot_ids >= 0) & (tokens >= 0), slot_ids.long(), scratch_row)
    pending.index_copy_(0, rows, torch.where(tokens >= 0, tokens, 0))


def _take_pending_first_tokens(
    packed: PackedInputs, is_decode_row: Tensor, pending: Tensor, scratch_row: int
) -> None:
    """token_ids[first token of each decode row] = pending[slot], per token so zero-length
    rows sharing an offset never race."""
    num_tokens, num_rows = packed.token_ids.shape[0], packed.query_lens.shape[0]
    lens = packed.query_lens.long()
    ends = torch.cumsum(lens, 0)
    token = torch.arange(num_tokens, device=lens.device)
    row = torch.searchsorted(ends, token, right=True)  # [T], R for padding
    row_c = row.clamp(max=num_rows - 1)
    is_first = (row < num_rows) & (token == (ends - lens)[row_c])
    take = is_first & is_decode_row[row_c]
    from_device = _gather_pending(pending, packed.slot_ids, scratch_row)[row_c]
    packed.token_ids.copy_(torch.where(take, from_device, packed.token_ids))


def step_capacity(d: Descriptor) -> PackedCapacity:
    if d.kind is GraphKind.PREFILL:  # every row a prompt lane: the lanes share P tokens
        lanes, prompt = d.prompt_lanes, d.token_capacity
        return PackedCapacity(lanes, 1, prompt, prompt, lanes)
    if d.kind is GraphKind.MIXED:
        return PackedCapacity.mixed(
            d.batch_capacity, d.token_capacity, d.prefill_capacity, d.prompt_lanes
        )
    return PackedCapacity.mixed(d.batch_capacity, d.token_capacity, 0)


def round_capacity(d: Descriptor) -> RoundCapacity:
    return RoundCapacity(
        batch_capacity=d.batch_capacity,
        proposal_depth=d.proposal_depth,
        verify_width=d.token_capacity,
        packed_capacity=d.packed_capacity,
        prefill_capacity=d.prefill_capacity,
        prompt_lanes=d.prompt_lanes,
    )


def is_round_program(d: Descriptor) -> bool:
    return d.speculation_enabled and d.kind in (GraphKind.SPECULATIVE, GraphKind.MIXED)


def check_buildable(d: Descriptor, model: HybridModel) -> None:
    """Raise ProgramError when the model cannot run this descriptor."""
    if d.kind is GraphKind.VISION:
        why = check_vision_buildable(d, model)
        if why:
            raise ProgramError(f"{d.name}: {why}")
        return
    if d.kind not in (GraphKind.PREFILL, GraphKind.DECODE, GraphKind.SPECULATIVE, GraphKind.MIXED):
        raise ProgramError(f"{d.name}: no program builder for kind {d.kind.value!r}")
    if d.prompt_capacity % d.prompt_lanes:
        raise ProgramError(
            f"{d.name}: {d.prompt_lanes} prompt lanes do not split {d.prompt_capacity} "
            "tokens evenly"
        )
    if is_round_program(d) and d.proposal_depth > 0 and model.mtp is None:
        raise ProgramError(
            f"{d.name}: proposal depth {d.proposal_depth} needs an MTP head; "
            "the checkpoint has mtp_num_layers = 0"
        )
    if d.max_packed_extent > model.config.max_position_embeddings:
        raise ProgramError(
            f"{d.name}: packed extent {d.max_packed_extent} exceeds the model's "
            f"max_position_embeddings {model.config.max_position_embeddings}"
        )


def build_program(
    d: Descriptor,
    model: HybridModel,
    state: ModelState,
    workspace: Workspace,
    pending: Tensor,
    staging: HostStaging,
    history: SlotHistory | None = None,
    *,
    drafts_from_processed_logits: bool = True,
) -> Program:
    """Bind workspace views for ``d`` and close the program function over model and state
    (and the slots' sampling history, which penalties, bias and min_tokens read; a round
    program's drafts read it too unless ``drafts_from_processed_logits`` is False)."""
    check_buildable(d, model)
    if d.kind is GraphKind.VISION:  # its own inputs: nothing staged through the workspace
        inputs, run = build_vision_program(d, model)
        return Program(d, inputs, run, (), staging)
    scratch = state.scratch_row
    if is_round_program(d):
        capacity = round_capacity(d)
        inputs, uploads = workspace.round_inputs(capacity, device_allocated=d.is_device_allocated)

        round_hidden = _prompt_hidden(workspace, model, capacity.prefill_capacity)
        inputs.ple = workspace.ple_rows(model)

        def run_round(x: RoundProgramInputs, needs_logprobs: bool = True) -> RoundOutputs:
            with model.gathering_ple_rows(_ple_lookups(x.ple)):
                return _run_round(x, needs_logprobs)

        def _run_round(x: RoundProgramInputs, needs_logprobs: bool) -> RoundOutputs:
            pending_tokens = _gather_pending(pending, x.round.slot_ids, scratch)
            x.round.pending_tokens.copy_(
                torch.where(x.is_decode_row, pending_tokens, x.round.pending_tokens)
            )
            out = speculative_round(
                model,
                state,
                x.round,
                capacity,
                x.sampling,
                False,
                history,
                x.begin,
                needs_logprobs,
                drafts_from_processed_logits,
            )
            emitted = out.num_emitted
            last = out.output_tokens.gather(1, (emitted - 1).clamp(min=0)[:, None]).squeeze(1)
            _store_pending(pending, x.round.slot_ids, torch.where(emitted > 0, last, -1), scratch)
            if round_hidden is not None and out.prompt_hidden is not None:
                round_hidden.copy_(out.prompt_hidden)
            return dataclasses.replace(out, prompt_hidden=None)  # not a static output

        return Program(d, inputs, run_round, uploads, staging, history, round_hidden)

    capacity = step_capacity(d)
    inputs, uploads = workspace.step_inputs(capacity)
    step_hidden = _prompt_hidden(workspace, model, capacity.prefill_capacity)
    inputs.ple = workspace.ple_rows(model)

    def run_packed_step(x: StepProgramInputs, needs_logprobs: bool = True) -> StepProgramOutputs:
        with model.gathering_ple_rows(_ple_lookups(x.ple)):
            return _run_packed_step(x, needs_logprobs)

    def _run_packed_step(x: StepProgramInputs, needs_logprobs: bool) -> StepProgramOutputs:
        packed = x.packed
        _take_pending_first_tokens(packed, x.is_decode_row, pending, scratch)
        out = run_step(model, state, packed, capacity, x.sampling, history, x.begin, needs_logprobs)
        _store_pending(pending, packed.slot_ids, out.next_tokens, scratch)
        if step_hidden is not None:
            step_hidden.copy_(gather_rows(out.target.hidden, out.target.meta.prompt_index))
        lp = out.logprobs
        if lp is None:  # skipped: the static logprob outputs keep what they hold
            return StepProgramOutputs(out.next_tokens, None, None, None)
        return StepProgramOutputs(out.next_tokens, lp.logprob, lp.top_ids, lp.top_logprobs)

    return Program(d, inputs, run_packed_step, uploads, staging, history, step_hidden)


def _ple_lookups(staged: PleRowsInput | None):
    """The staged rows' lookups while the runtime delivers rows (host / disk residency);
    None: the PLE layers gather from the model's own table (device residency)."""
    if staged is None or not staged.is_enabled:
        return None
    return staged.lookups()


def _prompt_hidden(workspace: Workspace, model: HybridModel, prefill_capacity: int):
    """The workspace view a program with a prompt lane writes its hidden states to."""
    if not prefill_capacity:
        return None
    return workspace.prompt_hidden(prefill_capacity, model.embed_tokens.weight.dtype)


__all__ = [
    "Program",
    "ProgramError",
    "PromptChunk",
    "RoundProgramInputs",
    "StepProgramInputs",
    "StepProgramOutputs",
    "build_program",
    "check_buildable",
    "is_round_program",
]
