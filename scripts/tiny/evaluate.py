"""Measurements of a checkpoint on held-out text, each through the code that serves it.

Validation loss uses the batched training forward; MTP acceptance, greedy samples and
timings use the packed serving path (``run_step`` for prefill and plain decoding,
``speculative_round`` with greedy acceptance for drafts), so the numbers in the model card
are what the runtime will see.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ignition.model.model import HybridModel
from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors
from ignition.model.speculative import RoundCapacity, RoundInputs, speculative_round
from ignition.model.state import ModelState, contiguous_pages
from ignition.model.step import run_step
from ignition.model.training import forward_train
from scripts.tiny.data import TokenStream

PAGE_SIZE = 16


@dataclass(frozen=True)
class Validation:
    num_tokens: int
    lm_loss: float  # nats per token
    perplexity: float
    mtp_loss: float  # nats per token of the t+2 prediction
    mtp_top1_vs_target: float  # teacher forced: argmax draft == target argmax at t+1


@dataclass(frozen=True)
class Acceptance:
    """Greedy speculative rounds: at_least[k-1] = P(the first k drafts are all accepted)."""

    num_prompts: int
    num_rounds: int  # lane-rounds over all prompts
    draft_depth: int
    at_least: tuple[float, ...]
    conditional: tuple[float, ...]  # P(draft k accepted | drafts 1..k-1 accepted)
    tokens_per_round: float


@dataclass(frozen=True)
class ServingSpeed:
    decode_step_ms_batch4: float
    prefill_4096_ms: float


def new_state(model: HybridModel, num_slots: int, max_tokens: int) -> ModelState:
    pages_per_slot = -(-max_tokens // PAGE_SIZE)
    state = ModelState.allocate(
        model.config,
        num_slots=num_slots,
        num_pages=num_slots * pages_per_slot,
        page_size=PAGE_SIZE,
        max_pages_per_slot=pages_per_slot,
    )
    contiguous_pages(state)
    return state


@torch.no_grad()
def validate(model: HybridModel, stream: TokenStream, seq_len: int, batch_size: int = 16):
    """Mean losses over consecutive held-out windows (every window starts a fresh context)."""
    windows = stream.windows(seq_len)
    lm_sum = mtp_sum = agree_sum = 0.0
    lm_count = mtp_count = 0
    for start in range(0, windows.shape[0], batch_size):
        batch = windows[start : start + batch_size]
        out = forward_train(model, batch)
        vocab = out.logits.shape[-1]
        targets = batch[:, 1:].reshape(-1)
        lm_sum += float(
            F.cross_entropy(out.logits[:, :-1].reshape(-1, vocab), targets, reduction="sum")
        )
        lm_count += targets.numel()
        if out.mtp_logits is not None:
            drafts = out.mtp_logits[:, :-1]  # [B, T-2, V] position t predicts t+2
            mtp_targets = batch[:, 2:].reshape(-1)
            mtp_sum += float(
                F.cross_entropy(drafts.reshape(-1, vocab), mtp_targets, reduction="sum")
            )
            mtp_count += mtp_targets.numel()
            agree = drafts.argmax(-1) == out.logits[:, 1:-1].argmax(-1)
            agree_sum += float(agree.sum())
    lm_loss = lm_sum / lm_count
    return Validation(
        num_tokens=lm_count,
        lm_loss=lm_loss,
        perplexity=math.exp(lm_loss),
        mtp_loss=mtp_sum / max(1, mtp_count),
        mtp_top1_vs_target=agree_sum / max(1, mtp_count),
    )


def prefill(model: HybridModel, state: ModelState, slot: int, prompt: list[int]) -> int:
    """Consume ``prompt`` into ``slot`` in one chunk; returns the greedy first output token."""
    capacity = PackedCapacity.mixed(1, 1, len(prompt))
    inputs = PackedInputs.build(capacity, [prompt], [slot], prefill_row=0)
    out = run_step(model, state, inputs, capacity, SamplingTensors.greedy(1))
    return int(out.next_tokens[0])


@torch.no_grad()
def greedy_generate(model: HybridModel, prompt: list[int], num_tokens: int) -> list[int]:
    """Plain greedy decoding (one token per step) through the packed serving path."""
    state = new_state(model, 1, len(prompt) + num_tokens + 1)
    tokens = [prefill(model, state, 0, prompt)]
    capacity = PackedCapacity.mixed(1, 1, 0)
    while len(tokens) < num_tokens:
        inputs = PackedInputs.build(capacity, [[tokens[-1]]], [0])
        out = run_step(model, state, inputs, capacity, SamplingTensors.greedy(1))
        tokens.append(int(out.next_tokens[0]))
    return tokens


@torch.no_grad()
def measure_acceptance(
    model: HybridModel, prompts: list[list[int]], num_rounds: int, draft_depth: int
) -> Acceptance:
    """Prefill each prompt, then ``num_rounds`` greedy MTP rounds verifying all D drafts.

    Prompts run four lanes at a time (the runtime's slot count), each in its own slot.
    """
    num_lanes = 4
    width = draft_depth + 1
    accepted: list[int] = []
    for first in range(0, len(prompts), num_lanes):
        group = prompts[first : first + num_lanes]
        max_len = max(len(p) for p in group) + num_rounds * width + 1
        state = new_state(model, num_lanes, max_len)
        pending = [prefill(model, state, lane, p) for lane, p in enumerate(group)]
        capacity = RoundCapacity(len(group), draft_depth, width, len(group) * width)
        slot_ids = torch.arange(len(group), dtype=torch.int32)
        query_lens = torch.full((len(group),), width, dtype=torch.int32)
        for _ in range(num_rounds):
            inputs = RoundInputs(
                pending_tokens=torch.tensor(pending), slot_ids=slot_ids, query_lens=query_lens
            )
            params = SamplingTensors.greedy(len(group))
            out = speculative_round(model, state, inputs, capacity, params, greedy=True)
            for lane in range(len(group)):
                num = int(out.num_accepted[lane])
                accepted.append(num)
                pending[lane] = int(out.output_tokens[lane, num])
    at_least = tuple(sum(a >= k for a in accepted) / len(accepted) for k in range(1, width))
    conditional = tuple(
        at_least[k] / (at_least[k - 1] if k else 1.0) if (at_least[k - 1] if k else 1.0) else 0.0
        for k in range(draft_depth)
    )
    return Acceptance(
        num_prompts=len(prompts),
        num_rounds=len(accepted),
        draft_depth=draft_depth,
        at_least=at_least,
        conditional=conditional,
        tokens_per_round=1.0 + sum(accepted) / len(accepted),
    )


@torch.no_grad()
def serving_speed(
    model: HybridModel, context_len: int = 256, num_repeats: int = 20
) -> ServingSpeed:
    """One 4096-token prefill chunk, and the median batch-4 decode step at ``context_len``."""
    prompt_len = 4096
    generator = torch.Generator().manual_seed(0)
    prompt = torch.randint(5, model.config.vocab_size, (prompt_len,), generator=generator)
    state = new_state(model, 1, prompt_len + 1)
    capacity = PackedCapacity.mixed(1, 1, prompt_len)
    inputs = PackedInputs.build(capacity, [prompt.tolist()], [0], prefill_row=0)
    start = time.perf_counter()
    run_step(model, state, inputs, capacity, SamplingTensors.greedy(1))
    prefill_ms = (time.perf_counter() - start) * 1e3

    state = new_state(model, 4, context_len + num_repeats + 1)
    for slot in range(4):
        prefill(model, state, slot, prompt[slot * context_len : (slot + 1) * context_len].tolist())
    decode = PackedCapacity.mixed(4, 1, 0)
    inputs = PackedInputs.build(decode, [[int(t)] for t in prompt[:4]], [0, 1, 2, 3])
    params = SamplingTensors.greedy(4)
    times = []
    for _ in range(num_repeats):
        start = time.perf_counter()
        run_step(model, state, inputs, decode, params)
        times.append((time.perf_counter() - start) * 1e3)
    return ServingSpeed(statistics.median(times), prefill_ms)


def held_out_prompts(
    stream_per_file: list[list[int]], prompt_len: int, per_file: int
) -> list[list[int]]:
    """``per_file`` prompts from each held-out file, at evenly spaced offsets inside it."""
    prompts = []
    for ids in stream_per_file:
        if len(ids) < 2 * prompt_len:
            continue
        for i in range(per_file):
            offset = (len(ids) - prompt_len) * (i + 1) // (per_file + 1)
            prompts.append(ids[offset : offset + prompt_len])
    return prompts
