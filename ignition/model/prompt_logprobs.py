"""Prompt logprobs: score every prompt position's next token after a program, chunk by chunk
on the device; only [N, K] values reach the host."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

# Positions projected at once: [SCORING_CHUNK, vocab] fp32 is the stage's peak memory.
SCORING_CHUNK = 256


@dataclass
class PromptScores:
    """Device tensors of N scored positions."""

    logprob: Tensor  # [N] fp32 raw logprob of each position's target token
    rank: Tensor  # [N] int64 its rank in the vocabulary, 1 = most likely (ties count above)
    top_ids: Tensor  # [N, K] int64 the K most likely tokens, best first
    top_logprobs: Tensor  # [N, K] fp32 their raw logprobs


@torch.no_grad()
def score_positions(
    project: Callable[[Tensor], Tensor],
    hidden: Tensor,
    targets: Tensor,
    num_top: int,
    chunk: int = SCORING_CHUNK,
) -> PromptScores:
    """Score ``targets`` [N] under the logits of final-normed ``hidden`` [N, H]; ``project``
    maps hidden to fp32 logits. Rank 1 is the most likely token (vLLM's rule)."""
    if hidden.shape[0] != targets.shape[0]:
        raise ValueError(f"{hidden.shape[0]} hidden rows for {targets.shape[0]} targets")
    pieces = []
    for start in range(0, hidden.shape[0], chunk):
        logprobs = torch.log_softmax(project(hidden[start : start + chunk]).float(), dim=-1)
        target = targets[start : start + chunk].long()
        chosen = logprobs.gather(-1, target[:, None])
        rank = (logprobs >= chosen).sum(-1)
        top, top_ids = logprobs.topk(min(num_top, logprobs.shape[-1]), dim=-1)
        pieces.append((chosen.squeeze(-1), rank, top_ids, top))
    if not pieces:
        empty = hidden.new_zeros(0, dtype=torch.float32)
        ids = torch.zeros(0, num_top, dtype=torch.int64, device=hidden.device)
        return PromptScores(empty, ids[:, 0], ids, ids.float())
    return PromptScores(*(torch.cat(parts) for parts in zip(*pieces, strict=True)))
