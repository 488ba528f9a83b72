"""Gated DeltaNet: linear attention with a delta-rule recurrent state per head.

Nothing here writes slot state: :class:`GdnUpdate` carries candidates, ``commit`` applies them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ignition.kernels import ops
from ignition.model.config import ModelConfig
from ignition.model.layers.norm import GatedRMSNorm, l2_normalize
from ignition.model.packing import (
    PackedMeta,
    gather_rows,
    prompt_conv,
    scatter_rows,
    take_rows,
)


@dataclass
class GdnUpdate:
    """Candidate state of one GDN layer after a packed forward (not yet committed)."""

    prompt_state: Tensor  # [L, H, Dk, Dv] fp32 after each prompt lane's chunk
    prompt_window: Tensor  # [L, C, K-1]
    decode_states: Tensor  # [R, W, H, Dk, Dv] fp32 after each decode position
    decode_windows: Tensor  # [R, W, C, K-1]


class GatedDeltaNet(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        hidden = config.hidden_size
        self.num_heads = heads = config.linear_num_heads
        self.num_key_heads = config.num_linear_key_heads
        self.key_dim = config.linear_key_head_dim
        self.value_dim = config.linear_value_head_dim
        self.q_proj = nn.Linear(hidden, self.num_key_heads * self.key_dim, bias=False)
        self.k_proj = nn.Linear(hidden, self.num_key_heads * self.key_dim, bias=False)
        self.v_proj = nn.Linear(hidden, heads * self.value_dim, bias=False)
        self.a_proj = nn.Linear(hidden, heads, bias=False)
        self.b_proj = nn.Linear(hidden, heads, bias=False)
        self.z_proj = nn.Linear(hidden, heads * self.value_dim, bias=False)
        self.conv1d = nn.Conv1d(
            config.conv_channels,
            config.conv_channels,
            config.conv_kernel,
            groups=config.conv_channels,
            bias=False,
        )
        # the short conv's activation is hidden_act, as transformers' GDN applies it
        self.conv_activation = config.hidden_act
        self.A_log = nn.Parameter(torch.zeros(heads))
        self.dt_bias = nn.Parameter(torch.ones(heads))
        self.norm = GatedRMSNorm(self.value_dim, config.rms_norm_eps, config.gdn_gate_activation)
        self.out_proj = nn.Linear(heads * self.value_dim, hidden, bias=False)

    def forward(
        self, x: Tensor, meta: PackedMeta, gdn_state: Tensor, conv_window: Tensor
    ) -> tuple[Tensor, GdnUpdate]:
        """x [T, hidden]; gdn_state [slots+1, H, Dk, Dv], conv_window [slots+1, C, K-1]."""
        num_tokens = x.shape[0]
        qkv = torch.cat([self.q_proj(x), self.k_proj(x), self.v_proj(x)], dim=-1)  # [T, C]
        conv_weight = self.conv1d.weight[:, 0, :]  # [C, K]
        prompt_window = take_rows(conv_window, meta.prompt_state_row)  # [L, C, K-1]
        decode_windows_in = take_rows(conv_window, meta.state_rows)  # [R, C, K-1]

        mixed = qkv.new_zeros(num_tokens + 1, qkv.shape[1])
        has_prompt_path = meta.capacity.prefill_capacity > 0
        if has_prompt_path:
            y_prompt, prompt_window = prompt_conv(
                gather_rows(qkv, meta.prompt_index), meta, conv_weight, prompt_window,
                activation=self.conv_activation,
            )
            scatter_rows(mixed, meta.prompt_index, y_prompt)
        y_decode, decode_windows = ops.causal_conv1d_update(
            gather_rows(qkv, meta.decode_index),
            conv_weight,
            None,
            decode_windows_in,
            activation=self.conv_activation,
        )
        scatter_rows(mixed, meta.decode_index, y_decode)
        mixed = mixed[:num_tokens]

        key_width = self.num_key_heads * self.key_dim
        q, k, v = mixed.split([key_width, key_width, self.num_heads * self.value_dim], dim=-1)
        q = l2_normalize(q.view(num_tokens, self.num_key_heads, self.key_dim))
        k = l2_normalize(k.view(num_tokens, self.num_key_heads, self.key_dim))
        if self.num_key_heads != self.num_heads:
            repeat = self.num_heads // self.num_key_heads
            q, k = q.repeat_interleave(repeat, dim=1), k.repeat_interleave(repeat, dim=1)
        v = v.view(num_tokens, self.num_heads, self.value_dim)
        q, k = q.to(x.dtype), k.to(x.dtype)
        g = -self.A_log.float().exp() * F.softplus(self.a_proj(x).float() + self.dt_bias.float())
        beta = torch.sigmoid(self.b_proj(x).float())  # [T, H]
        scale = self.key_dim**-0.5

        out = v.new_zeros(num_tokens + 1, self.num_heads, self.value_dim)
        prompt_state = take_rows(gdn_state, meta.prompt_state_row)  # [L, H, Dk, Dv]
        if has_prompt_path:
            # Padding tokens gather the zero sentinel row: g = 0 and beta = 0 leave S unchanged.
            o_prompt, prompt_state = self._prompt_lanes(
                [gather_rows(t, meta.prompt_index) for t in (q, k, v, g, beta)],
                meta,
                prompt_state,
                scale,
            )
            scatter_rows(out, meta.prompt_index, o_prompt)
        o_decode, decode_states = ops.recurrent_gated_delta_rule(
            *(gather_rows(t, meta.decode_index) for t in (q, k, v, g, beta)),
            take_rows(gdn_state, meta.state_rows),
            scale,
        )
        scatter_rows(out, meta.decode_index, o_decode)

        z = self.z_proj(x).view(num_tokens, self.num_heads, self.value_dim)
        o = self.norm(out[:num_tokens], z).reshape(num_tokens, -1)
        update = GdnUpdate(prompt_state, prompt_window, decode_states, decode_windows)
        return self.out_proj(o), update

    @staticmethod
    def _prompt_lanes(
        operands: list[Tensor], meta: PackedMeta, states: Tensor, scale: float
    ) -> tuple[Tensor, Tensor]:
        """The chunked delta rule over every prompt lane in one call (lanes folded into heads):
        returns (o [L * C_l, H, Dv], final states [L, H, Dk, Dv])."""
        lanes = meta.prompt_lanes
        if lanes == 1:
            o, state = ops.chunk_gated_delta_rule(*operands, states[0], scale)
            return o, state[None]
        folded = [
            meta.lane_major(t).transpose(0, 1).reshape(t.shape[0] // lanes, -1, *t.shape[2:])
            for t in operands
        ]
        o, state = ops.chunk_gated_delta_rule(*folded, states.flatten(0, 1), scale)
        num_heads, value_dim = states.shape[1], o.shape[-1]
        o = o.view(o.shape[0], lanes, num_heads, value_dim).transpose(0, 1)
        return o.reshape(-1, num_heads, value_dim), state.view_as(states)
