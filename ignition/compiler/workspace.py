"""Typed input workspaces, allocated once at the largest prepared capacity.

Every program binds leading views of the same buffers, whose addresses never change after
capture; host writes arrive as stream-ordered copies (``compiler.staging``). The program input
dataclasses live here as views of the workspace.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import Tensor

from ignition.compiler.buffers import (
    BUFFERS,
    SAMPLING_BUFFERS,
    Uploads,
    WorkspaceExtents,
    begin_buffers,
)
from ignition.compiler.ple_input import PleRowsInput, allocate_ple_rows
from ignition.compiler.vision_program import VisionProgramInputs, clear_vision_inputs
from ignition.model.grammar_mask import mask_words
from ignition.model.logits_processing import (
    NO_REPLAY,
    HistoryBegin,
)
from ignition.model.model import HybridModel
from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors
from ignition.model.speculative import PromptChunk, RoundCapacity, RoundInputs


@dataclass
class StepProgramInputs:
    """Prefill, decode and ordinary mixed programs: one packed step."""

    packed: PackedInputs
    sampling: SamplingTensors
    is_decode_row: Tensor  # [R] bool rows whose first token comes from ``pending``
    begin: HistoryBegin | None = None  # programs with prompt lanes: requests' first chunks
    ple: PleRowsInput | None = None  # models with an n-gram table: the staged rows


@dataclass
class StepProgramOutputs:
    next_tokens: Tensor  # [R] int64 sampled token per row, -1 inactive or mid-prompt
    # Raw logprobs; None from an eager run told that no row needs them (PreparedProgram.run)
    logprob: Tensor | None  # [R] fp32 raw logprob of the sampled token
    top_ids: Tensor | None  # [R, K] int64 the K most likely tokens
    top_logprobs: Tensor | None  # [R, K] fp32 their raw logprobs


@dataclass
class RoundProgramInputs:
    """Complete speculative programs (and speculative mixed ones, with a prompt lane)."""

    round: RoundInputs
    sampling: SamplingTensors
    is_decode_row: Tensor  # [R] bool
    begin: HistoryBegin | None = None
    ple: PleRowsInput | None = None


ProgramInputs = StepProgramInputs | RoundProgramInputs | VisionProgramInputs


class Workspace:
    """The shared device buffers; ``step_inputs`` / ``round_inputs`` return typed views
    together with the (buffer, length) prefixes they bind, which is what a frame uploads."""

    def __init__(
        self,
        extents: WorkspaceExtents,
        hidden_size: int,
        device: torch.device,
        vocab_size: int = 0,
    ) -> None:
        """``vocab_size`` > 0 sizes the grammar bitmask inputs (structured outputs)."""
        if vocab_size:
            extents = dataclasses.replace(extents, mask_words=mask_words(vocab_size))
        self.extents = extents
        self.device = torch.device(device)
        self.buffers: dict[str, Tensor] = {
            name: torch.full(
                (extents.length(spec.extent),), spec.padding, dtype=spec.dtype, device=device
            )
            for name, spec in BUFFERS.items()
        }
        self.image_features = torch.zeros(extents.max_image_tokens, hidden_size, device=device)
        self.hidden_size = hidden_size
        self._prompt_hidden: Tensor | None = None
        self._ple: PleRowsInput | None = None

    def prompt_hidden(self, prefill_capacity: int, dtype: torch.dtype) -> Tensor:
        """[prefill_capacity, hidden] view of the one buffer prompt-lane programs write
        their chunk's final hidden states to, for prompt logprobs (shared, not per program)."""
        if self._prompt_hidden is None:
            shape = (self.extents.max_prompt, self.hidden_size)
            self._prompt_hidden = torch.zeros(shape, dtype=dtype, device=self.device)
        return self._prompt_hidden[:prefill_capacity]

    def ple_rows(self, model: HybridModel) -> PleRowsInput | None:
        """The staged PLE rows every program binds (None without an n-gram table); layers'
        tables concatenated in PLE-layer order."""
        if model.config.ngram_ple is None:
            return None
        if self._ple is None:
            layers = sorted(
                (layer.ple_index, layer.ple) for layer in model.layers if layer.ple is not None
            )
            capacities, widths, offsets, first = [], [], [], 0
            for _, ple in layers:
                capacities.append(self.extents.max_tokens * ple.hash.num_heads)
                widths.append(ple.ngram_embedding.embedding_dim)
                offsets.append(first)
                first += ple.hash.num_rows
            dtype = layers[0][1].ngram_embedding.weight.dtype
            self._ple = allocate_ple_rows(capacities, widths, offsets, dtype, self.device)
        return self._ple

    def _views(self, lengths: dict[str, int]) -> tuple[dict[str, Tensor], Uploads]:
        views = {name: self.buffers[name][:n] for name, n in lengths.items()}
        return views, tuple(lengths.items())

    def _sampling(self, v: dict[str, Tensor], rows: int, width: int = 1) -> SamplingTensors:
        """The rows' sampling parameters; in a round program the token mask is position 0's."""
        params = SamplingTensors(**{name: v[name] for name in SAMPLING_BUFFERS})
        if "token_mask" in v:
            params.is_masked = v["is_masked"]
            params.token_mask = v["token_mask"].view(rows, width, self.extents.mask_words)[:, 0]
        return params

    def _grammar(self, rows: int, width: int = 1) -> dict[str, int]:
        """The grammar buffers a program of ``rows`` rows binds (none without a vocabulary):
        ``width`` masks per row."""
        words = self.extents.mask_words
        return {"is_masked": rows, "token_mask": rows * width * words} if words else {}

    @staticmethod
    def _begin(v: dict[str, Tensor]) -> HistoryBegin | None:
        if "history_begin" not in v:
            return None
        return HistoryBegin(
            v["history_begin"], v["bias_ids"], v["bias_values"], v["stop_ids"], v["replay_from"]
        )

    def _multimodal(self, rows: int, prompt: int) -> dict[str, int]:
        """The multimodal buffers a program of ``rows`` rows and ``prompt`` capacity binds."""
        if not self.extents.is_multimodal:
            return {}
        lengths = {"rope_offset": rows}
        if prompt:
            lengths |= {"image_positions": self.extents.max_image_tokens, "prompt_rope": 3 * prompt}
        return lengths

    def _rope_views(self, v: dict[str, Tensor], prompt: int) -> dict[str, Tensor | None]:
        return {
            "rope_offset": v.get("rope_offset"),
            "prompt_rope": v["prompt_rope"].view(3, prompt) if "prompt_rope" in v else None,
        }

    def step_inputs(self, capacity: PackedCapacity) -> tuple[StepProgramInputs, Uploads]:
        rows, tokens = capacity.batch_capacity, capacity.token_capacity
        self._check(rows, tokens, capacity.prefill_capacity)
        per_row = ("query_lens", "slot_ids", "is_decode_row", *SAMPLING_BUFFERS)
        lengths = {"token_ids": tokens, **dict.fromkeys(per_row, rows)}
        lanes = capacity.prompt_lanes
        if lanes > self.extents.max_lanes:
            raise ValueError(
                f"program of {lanes} prompt lanes exceeds the workspace's {self.extents.max_lanes}"
            )
        lengths |= {"prefill_row": lanes, "prompt_next_token": lanes}
        if capacity.prefill_capacity:
            lengths |= begin_buffers(lanes)
        lengths |= self._multimodal(rows, capacity.prefill_capacity)
        lengths |= self._grammar(rows)
        v, uploads = self._views(lengths)
        packed = PackedInputs(
            token_ids=v["token_ids"],
            query_lens=v["query_lens"],
            slot_ids=v["slot_ids"],
            prefill_row=v["prefill_row"],
            prompt_next_token=v["prompt_next_token"],
            image_features=self.image_features,
            image_positions=self.buffers["image_positions"],
            **self._rope_views(v, capacity.prefill_capacity),
        )
        inputs = StepProgramInputs(
            packed, self._sampling(v, rows), v["is_decode_row"], self._begin(v)
        )
        return inputs, uploads

    def round_inputs(
        self, capacity: RoundCapacity, device_allocated: bool
    ) -> tuple[RoundProgramInputs, Uploads]:
        rows = capacity.batch_capacity
        self._check(
            rows,
            capacity.packed.token_capacity,
            capacity.prefill_capacity,
            capacity.proposal_depth,
            capacity.verify_width,
        )
        lengths = dict.fromkeys(
            ("slot_ids", "pending_tokens", "is_decode_row", *SAMPLING_BUFFERS), rows
        )
        lengths["lane_ceilings" if device_allocated else "query_lens"] = rows
        lanes = capacity.prompt_lanes
        if lanes > self.extents.max_lanes:
            raise ValueError(
                f"program of {lanes} prompt lanes exceeds the workspace's {self.extents.max_lanes}"
            )
        if capacity.prefill_capacity:
            lengths |= {"prefill_row": lanes, "prompt_length": lanes, "prompt_next_token": lanes}
            lengths["prompt_tokens"] = capacity.prefill_capacity
            lengths |= begin_buffers(lanes)
        lengths |= self._multimodal(rows, capacity.prefill_capacity)
        width, depth = capacity.verify_width, capacity.proposal_depth
        words = self.extents.mask_words
        lengths |= self._grammar(rows, width)
        if depth:
            lengths["supplied_drafts"] = rows * depth
        v, uploads = self._views(lengths)
        prompt = None
        if capacity.prefill_capacity:
            prompt = PromptChunk(
                lane=v["prefill_row"],
                token_ids=v["prompt_tokens"],
                length=v["prompt_length"],
                next_token=v["prompt_next_token"],
            )
        round_inputs = RoundInputs(
            pending_tokens=v["pending_tokens"],
            slot_ids=v["slot_ids"],
            lane_ceilings=v.get("lane_ceilings"),
            query_lens=v.get("query_lens"),
            supplied_drafts=v["supplied_drafts"].view(rows, depth) if depth else None,
            position_masks=v["token_mask"].view(rows, width, words) if words else None,
            prompt=prompt,
            image_features=self.image_features if "image_positions" in v else None,
            image_positions=v.get("image_positions"),
            **self._rope_views(v, capacity.prefill_capacity),
        )
        inputs = RoundProgramInputs(
            round_inputs, self._sampling(v, rows, width), v["is_decode_row"], self._begin(v)
        )
        return inputs, uploads

    def _check(self, rows: int, tokens: int, prompt: int, depth: int = 0, width: int = 1) -> None:
        e = self.extents
        if rows > e.max_rows or tokens > e.max_tokens or prompt > e.max_prompt:
            raise ValueError(
                f"program extents rows={rows} tokens={tokens} prompt={prompt} exceed the "
                f"workspace ({e.max_rows}, {e.max_tokens}, {e.max_prompt})"
            )
        if depth > e.max_depth or width > e.max_width:
            raise ValueError(
                f"round program D={depth} W={width} exceeds the workspace's "
                f"D={e.max_depth} W={e.max_width}"
            )


def clear_inputs(inputs: ProgramInputs) -> None:
    """Reset a program's inputs to an all-padding population (mutates no request)."""
    if isinstance(inputs, VisionProgramInputs):
        clear_vision_inputs(inputs)
        return
    if isinstance(inputs, RoundProgramInputs):
        r = inputs.round
        r.slot_ids.fill_(-1)
        r.pending_tokens.zero_()
        for t in (r.query_lens, r.lane_ceilings):
            if t is not None:
                t.zero_()
        if r.supplied_drafts is not None:
            r.supplied_drafts.fill_(-1)
        if r.prompt is not None:
            r.prompt.lane.fill_(-1)
            r.prompt.length.zero_()
            r.prompt.next_token.fill_(-1)
        _clear_rope(r.image_positions, r.rope_offset, r.prompt_rope)
    else:
        p = inputs.packed
        p.token_ids.zero_()
        p.query_lens.zero_()
        p.slot_ids.fill_(-1)
        p.prefill_row.fill_(-1)
        p.prompt_next_token.fill_(-1)
        _clear_rope(p.image_positions, p.rope_offset, p.prompt_rope)
    inputs.is_decode_row.zero_()
    if inputs.begin is not None:
        inputs.begin.row.fill_(-1)
        inputs.begin.bias_ids.fill_(-1)
        inputs.begin.bias_values.zero_()
        inputs.begin.stop_ids.fill_(-1)
        if inputs.begin.replay_from is not None:
            inputs.begin.replay_from.fill_(NO_REPLAY)
    for name in SAMPLING_BUFFERS:
        getattr(inputs.sampling, name).fill_(BUFFERS[name].padding)
    if inputs.sampling.is_masked is not None:
        inputs.sampling.is_masked.fill_(False)


def _clear_rope(positions: Tensor | None, offset: Tensor | None, rope: Tensor | None) -> None:
    for t, value in ((positions, -1), (offset, 0), (rope, -1)):
        if t is not None:
            t.fill_(value)
