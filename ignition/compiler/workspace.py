"""Typed input workspaces, allocated once at the largest prepared capacity.

Every program variant binds contiguous leading views of the same buffers, so a
catalog of dozens of programs costs one set of input buffers, and the buffers'
addresses never change after capture (a CUDA graph reads fixed addresses).
Programs run one after another on one stream; host writes reach these buffers
as stream-ordered copies, so a queued frame's inputs never overwrite what a
running frame still reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import Tensor

from ignition.components.catalog import Descriptor, GraphKind
from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingParams
from ignition.model.speculative import PromptChunk, RoundCapacity, RoundInputs


@dataclass(frozen=True)
class WorkspaceExtents:
    """The largest extents any prepared program binds."""

    max_rows: int
    max_tokens: int
    max_prompt: int
    max_image_tokens: int = 0

    @classmethod
    def of(cls, descriptors: Iterable[Descriptor], max_image_tokens: int = 0) -> WorkspaceExtents:
        descriptors = list(descriptors)
        if not descriptors:
            raise ValueError("a workspace needs at least one descriptor")
        rows = max(d.batch_capacity for d in descriptors)
        tokens = max(
            max(d.max_packed_extent, d.packed_capacity + d.prefill_capacity) for d in descriptors
        )
        prompt = max(
            (
                d.token_capacity if d.kind is GraphKind.PREFILL else d.prefill_capacity
                for d in descriptors
            ),
            default=0,
        )
        return cls(rows, tokens, max(prompt, 1), max_image_tokens)


class Workspace:
    """The shared buffers; ``step_inputs`` / ``round_inputs`` return typed views."""

    def __init__(self, extents: WorkspaceExtents, hidden_size: int, device: torch.device) -> None:
        self.extents = extents
        rows, tokens = extents.max_rows, extents.max_tokens

        def ints(n: int, dtype: torch.dtype = torch.int32, fill: int = 0) -> Tensor:
            return torch.full((n,), fill, dtype=dtype, device=device)

        self.token_ids = ints(tokens, torch.int64)
        self.query_lens = ints(rows)
        self.lane_ceilings = ints(rows)
        self.slot_ids = ints(rows, fill=-1)
        self.pending_tokens = ints(rows, torch.int64)
        self.is_decode_row = torch.zeros(rows, dtype=torch.bool, device=device)
        self.prefill_row = ints(1, fill=-1)
        self.prompt_next_token = ints(1, torch.int64, fill=-1)
        self.prompt_length = ints(1)
        self.prompt_tokens = ints(extents.max_prompt, torch.int64)
        self.image_features = torch.zeros(extents.max_image_tokens, hidden_size, device=device)
        self.image_positions = ints(extents.max_image_tokens, fill=-1)
        self.temperature = torch.zeros(rows, dtype=torch.float32, device=device)
        self.top_k = ints(rows)
        self.top_p = torch.ones(rows, dtype=torch.float32, device=device)
        self.seed = ints(rows, torch.int64)

    def sampling(self, rows: int) -> SamplingParams:
        return SamplingParams(
            self.temperature[:rows], self.top_k[:rows], self.top_p[:rows], self.seed[:rows]
        )

    def step_inputs(self, capacity: PackedCapacity):
        from ignition.compiler.programs import StepProgramInputs

        rows, tokens = capacity.batch_capacity, capacity.token_capacity
        self._check(rows, tokens, capacity.prefill_capacity)
        packed = PackedInputs(
            token_ids=self.token_ids[:tokens],
            query_lens=self.query_lens[:rows],
            slot_ids=self.slot_ids[:rows],
            prefill_row=self.prefill_row,
            prompt_next_token=self.prompt_next_token,
            image_features=self.image_features,
            image_positions=self.image_positions,
        )
        return StepProgramInputs(packed, self.sampling(rows), self.is_decode_row[:rows])

    def round_inputs(self, capacity: RoundCapacity, device_allocated: bool):
        from ignition.compiler.programs import RoundProgramInputs

        rows = capacity.batch_capacity
        self._check(rows, capacity.packed.token_capacity, capacity.prefill_capacity)
        prompt = None
        if capacity.prefill_capacity:
            prompt = PromptChunk(
                lane=self.prefill_row,
                token_ids=self.prompt_tokens[: capacity.prefill_capacity],
                length=self.prompt_length,
                next_token=self.prompt_next_token,
            )
        round_inputs = RoundInputs(
            pending_tokens=self.pending_tokens[:rows],
            slot_ids=self.slot_ids[:rows],
            lane_ceilings=self.lane_ceilings[:rows] if device_allocated else None,
            query_lens=None if device_allocated else self.query_lens[:rows],
            prompt=prompt,
        )
        return RoundProgramInputs(round_inputs, self.sampling(rows), self.is_decode_row[:rows])

    def _check(self, rows: int, tokens: int, prompt: int) -> None:
        e = self.extents
        if rows > e.max_rows or tokens > e.max_tokens or prompt > e.max_prompt:
            raise ValueError(
                f"program extents rows={rows} tokens={tokens} prompt={prompt} exceed the "
                f"workspace ({e.max_rows}, {e.max_tokens}, {e.max_prompt})"
            )
