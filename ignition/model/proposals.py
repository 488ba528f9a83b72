"""Proposals (MTP drafts or host-supplied ones) and target-row allocation of a speculative
round; both allocations return the FP32 confidence sidecar [2, B, D]."""

from __future__ import annotations

import torch
from torch import Tensor

from ignition.kernels import ops
from ignition.model.coupled_verify import draft_stream
from ignition.model.layers.qsa import DraftSelections
from ignition.model.logits_processing import SlotHistory
from ignition.model.model import HybridModel
from ignition.model.sampling import (
    SamplingTensors,
    exponential_noise,
    sample_from,
    target_distribution,
)
from ignition.model.state import ModelState


def propose(
    model: HybridModel,
    state: ModelState,
    pending_tokens: Tensor,
    slot_ids: Tensor,
    supplied_drafts: Tensor | None,
    depth: int,
    params: SamplingTensors,
    start_pos: Tensor,
    rope_offset: Tensor | None = None,
    history: SlotHistory | None = None,
) -> tuple[Tensor, Tensor]:
    """(draft tokens [B, D], draft distributions [B, D, V]); slot -1 lanes draft nothing.
    ``supplied_drafts`` [B, D] (-1 ends a prefix) replace MTP drafts with q one-hot;
    ``history`` processes the draft logits as the target's are (None: raw draft logits)."""
    vocab = model.config.vocab_size
    device = pending_tokens.device
    if supplied_drafts is not None and model.mtp is None:
        drafts = torch.zeros_like(supplied_drafts, dtype=torch.int64)
        dists = torch.zeros(*drafts.shape, vocab, dtype=torch.float32, device=device)
        return _take_supplied(drafts, dists, supplied_drafts)
    drafts, dists = _mtp_drafts(
        model, state, pending_tokens, slot_ids, depth, params, start_pos, rope_offset, history
    )
    if supplied_drafts is None:
        return drafts, dists
    return _take_supplied(drafts, dists, supplied_drafts)


def supplied_prefix(supplied_drafts: Tensor) -> Tensor:
    """[B, D] bool: the supplied tokens before each row's first -1."""
    return (supplied_drafts >= 0).int().cumprod(dim=-1).bool()


def _take_supplied(drafts: Tensor, dists: Tensor, supplied_drafts: Tensor) -> tuple[Tensor, Tensor]:
    """Rows with a supplied prefix take it with q one-hot, in place on ``dists``."""
    in_prefix = supplied_prefix(supplied_drafts)
    is_supplied = in_prefix[:, :1]  # [B, 1]
    drafts = torch.where(is_supplied, torch.where(in_prefix, supplied_drafts.long(), 0), drafts)
    dists.masked_fill_(is_supplied[..., None], 0.0)
    own = dists.gather(-1, drafts[..., None]).squeeze(-1)  # MTP rows keep q(draft)
    one_hot = torch.where(is_supplied, in_prefix.float(), own)
    dists.scatter_(-1, drafts[..., None], one_hot[..., None])
    return drafts, dists


def verification_limits(
    supplied_drafts: Tensor | None,
    is_masked: Tensor | None,
    has_position_masks: bool,
    has_mtp: bool,
) -> Tensor | None:
    """[B] int32 the most verification rows each lane may use (None: no limit): a supplied
    prefix bounds it, and a masked lane verifies only supplied drafts with every mask."""
    if supplied_drafts is None and is_masked is None:
        return None
    reference = supplied_drafts if supplied_drafts is not None else is_masked
    unlimited = torch.full(reference.shape[:1], 1 << 30, dtype=torch.int32, device=reference.device)
    limit = unlimited
    is_supplied = torch.zeros_like(unlimited, dtype=torch.bool)
    if supplied_drafts is not None:
        num_supplied = supplied_prefix(supplied_drafts).sum(-1).int()
        is_supplied = num_supplied > 0
        without = unlimited if has_mtp else torch.ones_like(unlimited)
        limit = torch.where(is_supplied, num_supplied + 1, without)
    if is_masked is not None:
        can_verify = is_supplied & has_position_masks
        limit = torch.where(is_masked & ~can_verify, limit.clamp(max=1), limit)
    return limit


def _mtp_drafts(
    model: HybridModel,
    state: ModelState,
    pending_tokens: Tensor,
    slot_ids: Tensor,
    depth: int,
    params: SamplingTensors,
    start_pos: Tensor,
    rope_offset: Tensor | None,
    history: SlotHistory | None,
) -> tuple[Tensor, Tensor]:
    """D MTP drafts and their q, per row (see the module docstring)."""
    num_rows = pending_tokens.shape[0]
    vocab = model.config.vocab_size
    device = pending_tokens.device
    drafts = torch.zeros(num_rows, depth, dtype=torch.int64, device=device)
    dists = torch.zeros(num_rows, depth, vocab, dtype=torch.float32, device=device)
    rows = torch.where(slot_ids >= 0, slot_ids.long(), state.scratch_row)
    mtp_hidden = state.mtp_hidden[rows]
    previous = pending_tokens.long()
    is_greedy = params.temperature <= 0
    drafted = None  # [B, V] int32 counts of the drafts so far (processed rows only)
    if history is not None and depth > 0:
        history_rows = history.rows(slot_ids)
        drafted = torch.zeros(num_rows, vocab, dtype=torch.int32, device=device)
    # index_share_for_mtp_iteration: later draft steps reuse the first one's QSA selection.
    selections = DraftSelections() if model.config.index_share_for_mtp_iteration else None
    stream = draft_stream()  # under coupling, the noise the target samples this position with
    for k in range(depth):
        if k > 0:
            # Draft k+1 comes from position S + k, fed the previous draft and its MTP hidden.
            mtp_hidden = model.draft_step(
                previous, mtp_hidden, slot_ids, k - 1, state, rope_offset, selections
            )
        logits = model.draft_logits(mtp_hidden)
        if drafted is not None:
            # Verification position k: the history plus drafts 1..k-1, k tokens more output.
            offset = torch.full((num_rows,), k, dtype=torch.int32, device=device)
            logits = history.process(logits, history_rows, params, drafted, offset)
        # Greedy lanes draft the argmax but keep the softmax as q: it is their confidence.
        q = torch.where(
            is_greedy[:, None], torch.softmax(logits, -1), target_distribution(logits, params)
        )
        noise = exponential_noise(params.seed, stream, start_pos + k + 1, vocab)
        previous = torch.where(is_greedy, logits.argmax(-1), sample_from(q, noise))
        drafts[:, k] = previous
        dists[:, k] = q
        if drafted is not None and k + 1 < depth:
            drafted.scatter_add_(1, previous[:, None], torch.ones_like(drafted[:, :1]))
    return drafts, dists


def allocate(
    slot_ids: Tensor,
    lane_ceilings: Tensor | None,
    query_lens: Tensor | None,
    packed_capacity: int,
    token_probs: Tensor,
) -> tuple[Tensor, Tensor]:
    """(query lengths [B] int32, confidence sidecar [2, B, D] fp32); slot -1 lanes get 0."""
    is_active = slot_ids >= 0
    if (lane_ceilings is None) == (query_lens is None):
        raise ValueError("give exactly one of lane_ceilings (device) and query_lens (host)")
    if lane_ceilings is not None:
        ceilings = torch.where(is_active, lane_ceilings, 0).to(torch.int32)
        return ops.allocate_speculative_prefixes(token_probs, ceilings, packed_capacity)
    # The caller checks the lengths fit on the host; reading them here would sync.
    query_lens = torch.where(is_active, query_lens, 0).to(torch.int32)
    probs = torch.where(is_active[:, None], token_probs, 0.0)
    confidence = torch.stack([probs, probs.cumprod(dim=1)])
    return query_lens, confidence
