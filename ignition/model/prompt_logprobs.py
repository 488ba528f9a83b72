"""Prompt logprobs: score every prompt position's actual next token, chunk by chunk.

A request that asks for prompt logprobs (vLLM's ``prompt_logprobs``, or completions'
``echo`` with ``logprobs``) needs, at each prompt position p, the raw log-softmax of the
model's logits there, read at the prompt token p + 1: its logprob, its rank in the
vocabulary and the most likely alternatives. The programs project only the rows they
sample (a whole chunk's logits would be [chunk, vocab] fp32, 4 GB for a 4096-token chunk
at a 248k vocabulary), so this stage runs after the program, on the final-normed hidden
states it wrote of its prompt lane (``Program.prompt_hidden``, one workspace buffer),
and reduces them on the device ``SCORING_CHUNK`` positions at a time: lm_head ->
log_softmax -> the target's logprob and rank, and the top K. Only [N, K] values ever
reach the host.

It is not a prepared program: it runs eagerly, only for the frames whose prompt lane asked
for it, so the catalog each recipe declares (and ``ignition catalog --check``) is
unchanged, and requests that did not ask pay only for one copy of the chunk's hidden
states per frame (into that buffer, inside the program).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

# Positions projected at once: [SCORING_CHUNK, vocab] fp32 is the stage's peak (155 MB at
# a 151,936-token vocabulary), whatever the prompt length.
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
    """Score ``targets`` [N] under the logits of final-normed ``hidden`` [N, H].

    ``project`` is the model's vocabulary projection (hidden -> fp32 logits). The rank
    counts the tokens whose logprob is at least the target's (vLLM's rule), so the most
    likely token has rank 1.
    """
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
