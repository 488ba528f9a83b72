"""The complete speculative round: propose, allocate, verify, accept, commit, absorb.

One function over fixed capacities B (rows), D (proposal depth), W (verify width per row,
pending token included) and P (packed target tokens), so it captures as one program. A fully
rejected round leaves exactly the state of a round that never proposed. A grammar-masked row
verifies only host-supplied drafts with one mask per position, else its width is clamped to 1.
Prompt lanes (``model.round_prompt``) share the target forward. Stages: docs/model.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ignition.kernels import ops
from ignition.model.coupled_verify import coupled_verify, position_samples, verification_mode
from ignition.model.grammar_mask import apply_token_mask
from ignition.model.logits_processing import (
    HistoryBegin,
    SlotHistory,
    TokenLogprobs,
    draft_counts,
    token_logprobs,
)
from ignition.model.model import HybridModel
from ignition.model.packing import PackedCapacity, gather_rows
from ignition.model.proposals import allocate, propose, verification_limits
from ignition.model.round_prompt import PromptChunk, pack_verify_inputs, prompt_rows
from ignition.model.sampling import (
    INVALID_TOKEN,
    RandomStream,
    SamplingTensors,
    exponential_noise,
    finite_rows,
    sample,
    seeded_uniform,
    target_distribution,
)
from ignition.model.state import ModelState
from ignition.model.step import add_prompt_lanes, continued_rows, next_token_per_position


@dataclass(frozen=True)
class RoundCapacity:
    """Static extents B/D/W/P of one speculative program (+ the mixed prompt capacity)."""

    batch_capacity: int
    proposal_depth: int
    verify_width: int
    packed_capacity: int
    prefill_capacity: int = 0
    prompt_lanes: int = 1  # L prompt rows, each of at most prefill_capacity / L tokens

    def __post_init__(self) -> None:
        b, d, w = self.batch_capacity, self.proposal_depth, self.verify_width
        p = self.packed_capacity
        if b <= 0 or d < 0 or w <= 0 or self.prefill_capacity < 0:
            raise ValueError(f"round capacity needs B > 0, D >= 0, W > 0; got B={b} D={d} W={w}")
        if self.prompt_lanes > 1 and self.prompt_lanes >= b:
            raise ValueError(f"{self.prompt_lanes} prompt lanes leave no decoder row of B={b}")
        if not b <= p <= b * w:
            raise ValueError(f"round capacity P={p} must lie in [B, B*W] = [{b}, {b * w}]")

    @property
    def packed(self) -> PackedCapacity:
        """Verification layout: decode lanes share P, the prompt lane adds its own capacity."""
        return PackedCapacity(
            self.batch_capacity,
            self.verify_width,
            self.prefill_capacity,
            self.packed_capacity + self.prefill_capacity,
            self.prompt_lanes,
        )


@dataclass
class RoundInputs:
    """Per-lane inputs: exactly one of ``lane_ceilings`` (device allocation) and
    ``query_lens`` (host allocation) is given."""

    pending_tokens: Tensor  # [B] int64
    slot_ids: Tensor  # [B] int32, -1 = inactive lane
    lane_ceilings: Tensor | None = None  # [B] int32 min(D + 1, W, request limit)
    query_lens: Tensor | None = None  # [B] int32 1 + drafts to verify
    supplied_drafts: Tensor | None = None  # [B, D] int64 host proposals, -1 = none
    position_masks: Tensor | None = None  # [B, W, words] int32 bitmask per position
    prompt: PromptChunk | None = None  # the mixed program's prompt lanes
    # multimodal (see PackedInputs): the prompt lane's image features and rope, every lane's offset
    image_features: Tensor | None = None  # [I, hidden]
    image_positions: Tensor | None = None  # [I] int32, -1 = unused
    prompt_rope: Tensor | None = None  # [3, prefill_capacity] int32
    rope_offset: Tensor | None = None  # [B] int32


@dataclass
class RoundOutputs:
    output_tokens: Tensor  # [B, W] int64 accepted drafts, then replacement/bonus, then -1
    num_accepted: Tensor  # [B] int32
    query_lens: Tensor  # [B] int32 verified positions per lane (the chunk for the prompt lane)
    draft_tokens: Tensor  # [B, D] int64
    confidence: Tensor  # [2, B, D] fp32 per-position and joint prefix draft probabilities
    survival: Tensor  # [B, D] fp32 cumulative min(1, p/q) over offered drafts
    logprobs: TokenLogprobs | None = None  # [B, W] raw logprobs of the output tokens
    # With prompt lanes: final-normed hidden [prefill_capacity, hidden], lane-major.
    prompt_hidden: Tensor | None = None

    @property
    def num_emitted(self) -> Tensor:
        """[B] tokens each lane emits: accepted drafts + 1, 0 for inactive lanes."""
        return (self.output_tokens >= 0).sum(-1)


def _limited_rows(
    inputs: RoundInputs, params: SamplingTensors, has_mtp: bool
) -> tuple[Tensor | None, Tensor | None]:
    """(lane ceilings, host query lengths) clamped to each row's verification limit."""
    ceilings, host_lens = inputs.lane_ceilings, inputs.query_lens
    limit = verification_limits(
        inputs.supplied_drafts, params.is_masked, inputs.position_masks is not None, has_mtp
    )
    if limit is None:
        return ceilings, host_lens
    if ceilings is not None:
        ceilings = torch.minimum(ceilings, limit).to(ceilings.dtype)
    if host_lens is not None:
        host_lens = torch.minimum(host_lens, limit).to(host_lens.dtype)
    return ceilings, host_lens


@torch.no_grad()
def speculative_round(
    model: HybridModel,
    state: ModelState,
    inputs: RoundInputs,
    capacity: RoundCapacity,
    params: SamplingTensors,
    greedy: bool,
    history: SlotHistory | None = None,
    begin: HistoryBegin | None = None,
    needs_logprobs: bool = True,
    drafts_from_processed_logits: bool = True,
) -> RoundOutputs:
    """Run one complete round; ``greedy`` selects argmax acceptance for every speculative lane.
    ``history`` processes each position as ordinary sampling would; ``needs_logprobs``
    False leaves ``logprobs`` None; ``drafts_from_processed_logits`` False proposes from the
    raw draft logits (acceptance falls under penalties or bias, the output does not change)."""
    num_rows, width = capacity.batch_capacity, capacity.verify_width
    vocab = model.config.vocab_size
    device = inputs.pending_tokens.device
    lane_index = torch.arange(num_rows, device=device)
    is_prompt_lane = torch.zeros(num_rows, dtype=torch.bool, device=device)
    prompt_lens = torch.zeros(num_rows, dtype=torch.int32, device=device)
    if inputs.prompt is not None:
        if capacity.prefill_capacity == 0:
            raise ValueError("a prompt lane needs a round capacity with prefill_capacity > 0")
        if inputs.prompt.num_lanes != capacity.prompt_lanes:
            raise ValueError(
                f"{inputs.prompt.num_lanes} prompt lanes for a round of {capacity.prompt_lanes}"
            )
        _, is_prompt_lane, prompt_lens = prompt_rows(inputs.prompt, inputs.slot_ids)
    is_active = inputs.slot_ids >= 0
    # The prompt lane proposes nothing and takes no share of P.
    spec_slots = torch.where(is_prompt_lane, -1, inputs.slot_ids)
    rows = torch.where(is_active, inputs.slot_ids.long(), state.scratch_row)
    start_pos = state.seq_lens[rows].long()  # the pending token's position S

    drafts, dists = propose(
        model,
        state,
        inputs.pending_tokens,
        spec_slots,
        inputs.supplied_drafts,
        capacity.proposal_depth,
        params,
        start_pos,
        inputs.rope_offset,
        history if drafts_from_processed_logits else None,
    )
    # Zero non-finite drafts (that lane fails below) so NaN stays out of the shared allocation.
    is_draft_valid = torch.isfinite(dists).all(-1).all(-1)  # [B]
    dists = torch.where(is_draft_valid[:, None, None], dists, 0.0)
    token_probs = dists.gather(-1, drafts.clamp(min=0)[..., None]).squeeze(-1)  # [B, D]
    ceilings, host_lens = _limited_rows(inputs, params, model.mtp is not None)
    spec_lens, confidence = allocate(
        spec_slots, ceilings, host_lens, capacity.packed_capacity, token_probs
    )
    spec_lens = spec_lens.clamp(max=min(width, capacity.proposal_depth + 1))
    query_lens = spec_lens
    if inputs.prompt is not None:
        query_lens = torch.where(is_prompt_lane, prompt_lens, spec_lens)

    verify = pack_verify_inputs(
        inputs.pending_tokens,
        inputs.slot_ids,
        drafts,
        query_lens,
        is_prompt_lane,
        width,
        min(width - 1, capacity.proposal_depth),
        capacity.packed.token_capacity,
        inputs.prompt,
        image_features=inputs.image_features,
        image_positions=inputs.image_positions,
        rope_offset=inputs.rope_offset,
        prompt_rope=inputs.prompt_rope,
    )
    out = model.forward_packed(verify, capacity.packed, state)
    meta = out.meta
    # One projection for the verification rows [B, W] and each lane's last row [B].
    last = (meta.cu_query_lens[1:].long() - 1).clamp(min=0)  # [B]
    sampled_rows = out.logits_at(torch.cat([meta.decode_index.reshape(-1), last]))
    raw = sampled_rows[: num_rows * width]  # [B * W, V]
    per_position = params.rows(lane_index.repeat_interleave(width))
    logits = raw
    history_rows = None
    if history is not None:
        if begin is not None:
            history.begin(begin, inputs.slot_ids)
        if inputs.prompt is not None:
            add_prompt_lanes(history, meta, verify.token_ids, inputs.slot_ids, begin)
        history_rows = history.rows(inputs.slot_ids)
        extra = draft_counts(drafts, width, vocab).reshape(-1, vocab)
        offsets = torch.arange(width, device=device, dtype=torch.int32).repeat(num_rows)
        logits = history.process(
            raw, history_rows.repeat_interleave(width), per_position, extra, offsets
        )
    if params.is_masked is not None and inputs.position_masks is not None:
        # every verification position under its own mask (the host's walk along the drafts)
        masks = inputs.position_masks[:, :width].reshape(num_rows * width, -1)
        logits = apply_token_mask(logits, masks, per_position.is_masked)
    elif params.is_masked is not None:  # a constrained row samples only at column 0
        is_first = torch.arange(width, device=device).repeat(num_rows) == 0
        logits = apply_token_mask(
            logits, per_position.token_mask, per_position.is_masked & is_first
        )
    target_probs = target_distribution(logits, per_position)
    # Only the positions a lane verifies count; a lane failing any of them is failed whole.
    is_position_valid = finite_rows(target_probs).reshape(num_rows, width)
    is_verified = torch.arange(width, device=device)[None, :] < spec_lens[:, None]
    # Only sampled lanes read q; greedy compares argmaxes.
    is_exact_without_q = is_prompt_lane | (params.temperature <= 0) | greedy
    is_lane_valid = (is_position_valid | ~is_verified).all(-1) & (
        is_draft_valid | is_exact_without_q
    )
    target_probs = torch.where(is_position_valid.reshape(-1, 1), target_probs, 0.0)
    target_probs = target_probs.reshape(num_rows, width, vocab)
    if capacity.proposal_depth == 0:
        drafts = drafts.new_zeros(num_rows, 1)
        dists = dists.new_zeros(num_rows, 1, vocab)
    if verification_mode() == "coupled" and not greedy:
        samples = position_samples(target_probs, params.seed, start_pos)
        num_accepted, output_tokens, survival = coupled_verify(
            drafts, dists, target_probs, samples, spec_lens
        )
    else:
        uniforms = seeded_uniform(params.seed, RandomStream.ACCEPT, start_pos, width)
        noise = exponential_noise(params.seed, RandomStream.RESAMPLE, start_pos, vocab)
        num_accepted, output_tokens, survival = ops.rejection_verify(
            drafts, dists, target_probs, spec_lens, uniforms, noise, greedy
        )
    survival = survival[:, : capacity.proposal_depth]

    prompt_raw = sampled_rows[num_rows * width :]
    prompt_logits = prompt_raw
    if history is not None:
        prompt_logits = history.process(prompt_raw, history_rows, params)
    prompt_logits = apply_token_mask(prompt_logits, params.token_mask, params.is_masked)
    prompt_token = sample(prompt_logits, params, meta.positions[last] + 1)
    first_output = torch.where(is_prompt_lane, prompt_token, output_tokens[:, 0])
    is_continued, continued_next = continued_rows(meta, verify.prompt_next_token)
    # A prompt lane emits its first output token only when its chunk ends the prompt.
    output_tokens[:, 0] = torch.where(is_continued, -1, first_output)
    # A failed speculative lane emits INVALID_TOKEN alone and commits nothing.
    is_failed = ~is_lane_valid & ~is_prompt_lane & is_active
    failed_row = torch.full_like(output_tokens, -1)
    failed_row[:, 0] = INVALID_TOKEN
    output_tokens = torch.where(is_failed[:, None], failed_row, output_tokens)
    num_accepted = torch.where(is_failed, 0, num_accepted)
    # Raw logprobs: output column j was sampled at verification position j.
    logprobs = None
    if needs_logprobs:
        logprobs = _round_logprobs(raw, output_tokens, prompt_raw, prompt_token, is_prompt_lane)
    if history is not None:
        history.record(inputs.slot_ids, output_tokens)

    commit_lens = torch.where((spec_lens > 0) & ~is_failed, num_accepted.long() + 1, 0)
    model.commit(out, commit_lens)
    row = meta.token_row.clamp(max=num_rows - 1)
    # Position j is followed by output j (drafts, then the new token); a prompt lane by its next.
    following = output_tokens[row, meta.token_offset.clamp(max=width - 1)]
    if inputs.prompt is not None:
        row_next = torch.where(is_continued, continued_next, first_output)
        in_prompt = next_token_per_position(
            verify.token_ids, meta.cu_query_lens, meta.token_row, row_next
        )
        following = torch.where(is_prompt_lane[row], in_prompt, following)
    absorb_lens = torch.where(is_prompt_lane, query_lens.long(), commit_lens)
    model.absorb_draft_context(out, following, absorb_lens)
    return RoundOutputs(
        output_tokens=output_tokens,
        num_accepted=num_accepted,
        query_lens=query_lens,
        draft_tokens=drafts[:, : capacity.proposal_depth],
        confidence=confidence,
        survival=survival,
        logprobs=logprobs,
        prompt_hidden=(
            None if inputs.prompt is None else gather_rows(out.hidden, meta.prompt_index)
        ),
    )


def _round_logprobs(
    raw: Tensor,
    output_tokens: Tensor,
    prompt_raw: Tensor,
    prompt_token: Tensor,
    is_prompt_lane: Tensor,
) -> TokenLogprobs:
    """[B, W] raw logprobs of the output tokens (column j sampled at position j)."""
    num_rows, width = output_tokens.shape
    logprobs = token_logprobs(raw, output_tokens.reshape(-1))
    prompt_logprobs = token_logprobs(prompt_raw, prompt_token)
    is_prompt_column = torch.zeros(num_rows, width, dtype=torch.bool, device=raw.device)
    is_prompt_column[:, 0] = is_prompt_lane
    return TokenLogprobs(
        torch.where(
            is_prompt_column, prompt_logprobs.logprob[:, None], logprobs.logprob.reshape(-1, width)
        ),
        torch.where(
            is_prompt_column[..., None],
            prompt_logprobs.top_ids[:, None],
            logprobs.top_ids.reshape(num_rows, width, -1),
        ),
        torch.where(
            is_prompt_column[..., None],
            prompt_logprobs.top_logprobs[:, None],
            logprobs.top_logprobs.reshape(num_rows, width, -1),
        ),
    )
