"""Logits processing before sampling (min_tokens, bias, penalties, as vLLM orders them) and raw
logprobs; per-slot history lives on the device, updated inside programs (docs/model.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ignition.model.sampling import SamplingTensors, runs_every_path

# The most alternatives a position reports (OpenAI's and vLLM's default cap).
MAX_LOGPROBS = 20
# Per request: logit-bias entries, and ids min_tokens masks (stop token ids and EOS).
MAX_LOGIT_BIAS = 300
MAX_STOP_IDS = 64
NO_REPLAY = 2**31 - 1


@dataclass
class HistoryBegin:
    """Per prompt lane (flat, lane-major tables): the history row a starting request resets
    and what its row starts with; at most one request begins per lane."""

    row: Tensor  # [L] int32 program row of each lane's beginning request, -1 = none
    bias_ids: Tensor  # [L * MAX_LOGIT_BIAS] int64 logit-bias token ids, -1 = unused
    bias_values: Tensor  # [L * MAX_LOGIT_BIAS] fp32
    stop_ids: Tensor  # [L * MAX_STOP_IDS] int64 ids min_tokens masks, -1 = unused
    # Where a restarted request's replayed output begins in its prompt; NO_REPLAY otherwise.
    replay_from: Tensor | None = None  # [L] int32

    @property
    def num_lanes(self) -> int:
        return self.row.shape[0]

    def lane_replay_from(self, lane: int) -> Tensor | None:
        """[1] lane ``lane``'s replay start (None when the program binds none)."""
        return None if self.replay_from is None else self.replay_from[lane : lane + 1]

    def lane(self, lane: int) -> HistoryBegin:
        """Lane ``lane``'s begin inputs as a one-lane view."""
        bias = self.bias_ids.shape[0] // self.num_lanes
        stops = self.stop_ids.shape[0] // self.num_lanes
        return HistoryBegin(
            self.row[lane : lane + 1],
            self.bias_ids[lane * bias : (lane + 1) * bias],
            self.bias_values[lane * bias : (lane + 1) * bias],
            self.stop_ids[lane * stops : (lane + 1) * stops],
            self.lane_replay_from(lane),
        )


@dataclass
class SlotHistory:
    """Per-slot sampling history on the device, plus a scratch row padding uses."""

    output_counts: Tensor  # [S + 1, V] int32 output tokens emitted so far, by id
    num_output: Tensor  # [S + 1] int32 output tokens emitted so far
    prompt_mask: Tensor  # [S + 1, V] bool prompt tokens (repetition penalty)
    bias: Tensor  # [S + 1, V] fp32 logit bias
    stop_mask: Tensor  # [S + 1, V] bool ids masked while num_output < min_tokens

    @classmethod
    def allocate(cls, num_slots: int, vocab_size: int, device: torch.device | str) -> SlotHistory:
        shape = (num_slots + 1, vocab_size)
        return cls(
            output_counts=torch.zeros(shape, dtype=torch.int32, device=device),
            num_output=torch.zeros(num_slots + 1, dtype=torch.int32, device=device),
            prompt_mask=torch.zeros(shape, dtype=torch.bool, device=device),
            bias=torch.zeros(shape, dtype=torch.float32, device=device),
            stop_mask=torch.zeros(shape, dtype=torch.bool, device=device),
        )

    @property
    def scratch_row(self) -> int:
        return self.num_output.shape[0] - 1

    @property
    def vocab_size(self) -> int:
        return self.output_counts.shape[1]

    def copy_row(self, source: int, destination: int) -> None:
        """Carry one request's history to another slot (stream-ordered device copies)."""
        for table in (self.output_counts, self.num_output, self.prompt_mask, self.bias):
            table[destination].copy_(table[source])
        self.stop_mask[destination].copy_(self.stop_mask[source])

    def rebuild_row(
        self,
        slot: int,
        prompt_ids: Sequence[int],
        output_ids: Sequence[int],
        bias: Sequence[tuple[int, float]],
        stop_ids: Sequence[int],
    ) -> None:
        """Rebuild a restored request's row from its tokens (checkpoints omit history)."""
        device = self.num_output.device
        for table in (self.output_counts, self.num_output, self.prompt_mask, self.bias):
            table[slot].zero_()
        self.stop_mask[slot].fill_(False)
        if prompt_ids:
            self.prompt_mask[slot, torch.tensor(prompt_ids, dtype=torch.long, device=device)] = True
        if output_ids:
            ids = torch.tensor(output_ids, dtype=torch.long, device=device)
            self.output_counts[slot].index_add_(0, ids, torch.ones_like(ids, dtype=torch.int32))
            self.num_output[slot] = len(output_ids)
        if bias:
            ids = torch.tensor([t for t, _ in bias], dtype=torch.long, device=device)
            values = torch.tensor([b for _, b in bias], dtype=torch.float32, device=device)
            self.bias[slot].index_put_((ids,), values)
        if stop_ids:
            self.stop_mask[slot, torch.tensor(stop_ids, dtype=torch.long, device=device)] = True

    def rows(self, slot_ids: Tensor) -> Tensor:
        """History rows of program rows: the slot, or the scratch row for padding."""
        return torch.where(slot_ids >= 0, slot_ids.long(), self.scratch_row)

    def begin(self, begin: HistoryBegin, slot_ids: Tensor) -> None:
        """Reset each starting request's row (``begin.row`` per lane, -1: the scratch row),
        then write its bias and stop ids; runs before anything reads the history."""
        if begin.num_lanes > 1:
            for lane in range(begin.num_lanes):  # a static, small loop
                self.begin(begin.lane(lane), slot_ids)
            return
        row_index = begin.row.long().clamp(min=0)
        starts = (begin.row >= 0) & (slot_ids[row_index] >= 0)
        row = torch.where(starts, slot_ids[row_index].long(), self.scratch_row)  # [1]
        for table in (self.output_counts, self.num_output, self.prompt_mask, self.bias):
            table.index_fill_(0, row, 0)
        self.stop_mask.index_fill_(0, row, False)
        for table, ids, values in (
            (self.bias, begin.bias_ids, begin.bias_values),
            (self.stop_mask, begin.stop_ids, torch.ones_like(begin.stop_ids, dtype=torch.bool)),
        ):
            valid = ids >= 0
            rows = torch.where(valid, row, self.scratch_row)
            written = torch.where(valid, values, 0).to(table.dtype)
            table.index_put_((rows, ids.clamp(min=0)), written)

    def add_prompt(
        self,
        slot: Tensor,
        tokens: Tensor,
        valid: Tensor,
        positions: Tensor | None = None,
        replay_from: Tensor | None = None,
    ) -> None:
        """Mark a prompt chunk's tokens [T] (where ``valid``) for ``slot`` [1] (-1: none);
        positions at or past ``replay_from`` [1] count as output instead."""
        valid = valid & (slot >= 0)
        is_output = torch.zeros_like(valid)
        if positions is not None and replay_from is not None:
            is_output = valid & (positions >= replay_from.long())
        is_prompt = valid & ~is_output
        ids = tokens.clamp(min=0)
        rows = torch.where(is_prompt, slot.long(), self.scratch_row)
        self.prompt_mask.index_put_((rows, ids), is_prompt)
        rows = torch.where(is_output, slot.long(), self.scratch_row)
        ones = is_output.to(torch.int32)
        self.output_counts.index_put_((rows, ids), ones, accumulate=True)
        self.num_output.index_put_((rows,), ones, accumulate=True)

    def record(self, slot_ids: Tensor, tokens: Tensor) -> None:
        """Count emitted tokens [R, K] per row (-1: none), inside the program."""
        emitted = tokens >= 0
        rows = torch.where(emitted, self.rows(slot_ids)[:, None], self.scratch_row).reshape(-1)
        ids = tokens.clamp(min=0).reshape(-1)
        ones = emitted.reshape(-1).to(torch.int32)
        self.output_counts.index_put_((rows, ids), ones, accumulate=True)
        self.num_output.index_put_((rows,), ones, accumulate=True)

    def process(
        self,
        logits: Tensor,
        rows: Tensor,
        params: SamplingTensors,
        extra_counts: Tensor | None = None,
        extra_output: Tensor | None = None,
    ) -> Tensor:
        """The processed logits [N, V] fp32 of history rows ``rows`` [N]; ``extra_counts``
        [N, V] and ``extra_output`` [N] add a verification position's draft prefix."""
        logits = logits.float()
        num_output = self.num_output[rows]
        if extra_output is not None:
            num_output = num_output + extra_output
        too_short = (num_output < params.min_tokens)[:, None]
        # CPU skips a stage neutral for every row (sampling.runs_every_path).
        if runs_every_path(too_short):
            logits = logits.masked_fill(too_short & self.stop_mask[rows], -torch.inf)
        logits = logits + self.bias[rows]
        penalized = (
            (params.repetition_penalty != 1)
            | (params.frequency_penalty != 0)
            | (params.presence_penalty != 0)
        )
        if not runs_every_path(penalized):
            return logits
        counts = self.output_counts[rows]
        if extra_counts is not None:
            counts = counts + extra_counts
        seen = counts > 0
        repetition = torch.where(
            seen | self.prompt_mask[rows], params.repetition_penalty[:, None], 1.0
        )
        logits = torch.where(logits > 0, logits / repetition, logits * repetition)
        logits = logits - params.frequency_penalty[:, None] * counts
        return logits - params.presence_penalty[:, None] * seen


def draft_counts(drafts: Tensor, width: int, vocab_size: int) -> Tensor:
    """[B, W, V] int32: at verification position j, the counts of the drafts verified before
    it (row token j is draft j - 1; position 0, the pending token, adds nothing)."""
    num_rows = drafts.shape[0]
    tokens = torch.full((num_rows, width), -1, dtype=torch.long, device=drafts.device)
    num_offered = min(width - 1, drafts.shape[1])
    tokens[:, 1 : 1 + num_offered] = drafts[:, :num_offered]
    one_hot = torch.zeros(num_rows, width, vocab_size, dtype=torch.int32, device=drafts.device)
    one_hot.scatter_(2, tokens.clamp(min=0)[..., None], (tokens >= 0).to(torch.int32)[..., None])
    return one_hot.cumsum(1, dtype=torch.int32)


@dataclass
class TokenLogprobs:
    """Raw logprobs of emitted tokens and the most likely alternatives (device tensors)."""

    logprob: Tensor  # [...] fp32 logprob of the emitted token
    top_ids: Tensor  # [..., K] int64
    top_logprobs: Tensor  # [..., K] fp32


def token_logprobs(raw_logits: Tensor, tokens: Tensor) -> TokenLogprobs:
    """Raw logprobs of ``tokens`` [N] under ``raw_logits`` [N, V], and the top K."""
    logprobs = torch.log_softmax(raw_logits.float(), dim=-1)
    chosen = logprobs.gather(-1, tokens.clamp(min=0)[:, None]).squeeze(-1)
    top, top_ids = logprobs.topk(min(MAX_LOGPROBS, logprobs.shape[-1]), dim=-1)
    return TokenLogprobs(chosen, top_ids, top)
