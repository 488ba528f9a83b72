"""Mixture of experts: softmax top-k routed gated-MLP experts plus a gated shared expert.

Inference dispatch never leaves the device; training keeps ``routed_host_grouped``, the
reference (docs/model.md).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ignition.kernels.activations import activation as activation_fn
from ignition.model.config import ModelConfig


class SwiGLU(nn.Module):
    """``down(act(gate(x)) * up(x))`` with the config's ``hidden_act``."""

    def __init__(self, hidden: int, intermediate: int, activation: str = "silu") -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)
        self.activation = activation
        self.act_fn = activation_fn(activation)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class MixtureOfExperts(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        hidden = config.hidden_size
        self.top_k = config.num_experts_per_tok
        self.gate = nn.Linear(hidden, config.num_experts, bias=False)
        act = config.hidden_act
        self.act_fn = activation_fn(act)
        self.experts = nn.ModuleList(
            SwiGLU(hidden, config.moe_intermediate_size, act) for _ in range(config.num_experts)
        )
        self.shared_expert = SwiGLU(hidden, config.shared_expert_intermediate_size, act)
        self.shared_expert_gate = nn.Linear(hidden, 1, bias=False)

    def route(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """(weights [T, k] fp32 renormalised, expert ids [T, k] int64)."""
        probs = torch.softmax(self.gate(x).float(), dim=-1)
        weights, experts = probs.topk(self.top_k, dim=-1)
        return weights / weights.sum(-1, keepdim=True), experts

    def forward(self, x: Tensor) -> Tensor:
        """x [T, hidden] -> [T, hidden]."""
        if torch.is_grad_enabled():
            routed = self.routed_host_grouped(x)
        elif self.can_dispatch_grouped(x):
            routed = self.routed_fixed_capacity(x)
        else:
            routed = self.routed_dense(x)
        shared = self.shared_expert(x).float() * torch.sigmoid(self.shared_expert_gate(x).float())
        return (routed + shared).to(x.dtype)

    def can_dispatch_grouped(self, x: Tensor) -> bool:
        """Whether this torch and device run the grouped GEMM on ``x``'s dtype and shapes."""
        if not hasattr(torch, "_grouped_mm"):
            return False
        if x.is_cuda and x.dtype != torch.bfloat16:
            return False
        # Grouped GEMM operands need 16-byte aligned strides.
        widths = (x.shape[1], self.experts[0].gate_proj.out_features)
        return all(w * x.element_size() % 16 == 0 for w in widths)

    def routed_dense(self, x: Tensor) -> Tensor:
        """Routed output [T, hidden] fp32 with every expert over every token (sync-free)."""
        weights, experts = self.route(x)
        dense = torch.zeros(x.shape[0], len(self.experts), device=x.device)
        dense.scatter_(1, experts, weights)  # [T, E], zero where not routed
        routed = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
        for e, expert in enumerate(self.experts):
            routed = routed + expert(x).float() * dense[:, e, None]
        return routed

    def routed_fixed_capacity(self, x: Tensor) -> Tensor:
        """Routed output [T, hidden] fp32 by fixed-capacity dispatch (sync-free, grouped)."""
        num_tokens, num_experts = x.shape[0], len(self.experts)
        weights, experts = self.route(x)
        flat_experts = experts.reshape(-1)  # [N = T * k]
        order = torch.argsort(flat_experts, stable=True)  # [N] assignments grouped by expert
        counts = torch.zeros(num_experts, dtype=torch.int32, device=x.device)
        counts.scatter_add_(0, flat_experts, torch.ones_like(flat_experts, dtype=torch.int32))
        group_ends = torch.cumsum(counts, 0, dtype=torch.int32)  # [E] on the device
        gate_up, down = self.stacked_weights()
        grouped_x = x[order // self.top_k]  # [N, hidden], static capacity
        h = torch._grouped_mm(grouped_x, gate_up.transpose(1, 2), offs=group_ends)
        gate, up = h.chunk(2, dim=-1)  # [N, I] each
        y = torch._grouped_mm(self.act_fn(gate) * up, down.transpose(1, 2), offs=group_ends)
        # One output row per (token, choice): plain index writes (no atomics), then sum over k.
        routed = torch.zeros(num_tokens * self.top_k, x.shape[1], device=x.device)
        routed.index_copy_(0, order, y.float() * weights.reshape(-1)[order, None])
        return routed.view(num_tokens, self.top_k, -1).sum(1)

    @torch.no_grad()
    def stacked_weights(self) -> tuple[Tensor, Tensor]:
        """(gate_up [E, 2I, hidden], down [E, hidden, I]) of the experts' current weights.
        Built on first use, outside any capture; on CUDA the parameters alias the stack."""
        params = [p for e in self.experts for p in e.parameters()]
        key = tuple((p.data_ptr(), p._version) for p in params)
        cached = getattr(self, "_stacked", None)
        if cached is not None and cached[0] == key:
            return cached[1], cached[2]
        inter = self.experts[0].gate_proj.out_features
        gate_up = torch.stack(
            [torch.cat([e.gate_proj.weight, e.up_proj.weight]) for e in self.experts]
        )
        down = torch.stack([e.down_proj.weight for e in self.experts])
        if gate_up.is_cuda:
            for i, e in enumerate(self.experts):
                e.gate_proj.weight.data = gate_up[i, :inter]
                e.up_proj.weight.data = gate_up[i, inter:]
                e.down_proj.weight.data = down[i]
            key = tuple((p.data_ptr(), p._version) for p in params)
        self._stacked = (key, gate_up, down)
        return gate_up, down

    def routed_host_grouped(self, x: Tensor) -> Tensor:
        """Routed output [T, hidden] fp32; reads counts on the host (training, reference)."""
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
