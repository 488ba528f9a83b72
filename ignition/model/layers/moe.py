"""Mixture of experts: softmax top-k routed SwiGLU experts plus a gated shared expert.

Routing weights are the softmax over all experts, restricted to the top k and renormalised.
Tokens are grouped by expert (a stable sort of the flattened assignments), so each expert
runs one matmul over all of its packed tokens, prompt and decode alike. Grouping needs the
per-expert counts on the host; while a CUDA graph is being captured the layer instead runs
every expert densely with zero weights for unrouted tokens (no sync, E/k times the work),
until a grouped-GEMM kernel replaces both.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ignition.model.config import Qwen38Config


class SwiGLU(nn.Module):
    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class MixtureOfExperts(nn.Module):
    def __init__(self, config: Qwen38Config) -> None:
        super().__init__()
        hidden = config.hidden_size
        self.top_k = config.num_experts_per_tok
        self.gate = nn.Linear(hidden, config.num_experts, bias=False)
        self.experts = nn.ModuleList(
            SwiGLU(hidden, config.moe_intermediate_size) for _ in range(config.num_experts)
        )
        self.shared_expert = SwiGLU(hidden, config.shared_expert_intermediate_size)
        self.shared_expert_gate = nn.Linear(hidden, 1, bias=False)

    def route(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """(weights [T, k] fp32 renormalised, expert ids [T, k] int64)."""
        probs = torch.softmax(self.gate(x).float(), dim=-1)
        weights, experts = probs.topk(self.top_k, dim=-1)
        return weights / weights.sum(-1, keepdim=True), experts

    def forward(self, x: Tensor) -> Tensor:
        """x [T, hidden] -> [T, hidden]."""
        is_capturing = x.is_cuda and torch.cuda.is_current_stream_capturing()
        routed = self.routed_dense(x) if is_capturing else self.routed_grouped(x)
        shared = self.shared_expert(x).float() * torch.sigmoid(self.shared_expert_gate(x).float())
        return (routed + shared).to(x.dtype)

    def routed_dense(self, x: Tensor) -> Tensor:
        """Routed output [T, hidden] fp32 with every expert over every token (sync-free)."""
        weights, experts = self.route(x)
        dense = torch.zeros(x.shape[0], len(self.experts), device=x.device)
        dense.scatter_(1, experts, weights)  # [T, E], zero where not routed
        routed = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
        for e, expert in enumerate(self.experts):
            routed = routed + expert(x).float() * dense[:, e, None]
        return routed

    def routed_grouped(self, x: Tensor) -> Tensor:
        """Routed output [T, hidden] fp32, each expert over its own tokens only."""
        num_tokens = x.shape[0]
        weights, experts = self.route(x)
        flat_experts = experts.reshape(-1)  # [T * k]
        order = torch.argsort(flat_experts, stable=True)
        token_of = order // self.top_k
        counts = torch.bincount(flat_experts, minlength=len(self.experts)).tolist()
        # One output row per (token, choice); plain index writes (no atomics) then a sum over k.
        routed = x.new_zeros(num_tokens * self.top_k, x.shape[1], dtype=torch.float32)
        flat_weights = weights.reshape(-1)
        start = 0
        for expert, count in zip(self.experts, counts, strict=True):
            if count:
                picked = order[start : start + count]
                y = expert(x[token_of[start : start + count]]).float()
                routed[picked] = y * flat_weights[picked, None]
            start += count
        return routed.view(num_tokens, self.top_k, -1).sum(1)
