"""The Qwen3.5 vision tower: patches in, features of the text hidden size out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ignition.kernels.activations import activation
from ignition.model.config_vision import VisionConfig
from ignition.model.vision.grid import ImageGrid, interpolation_taps, patch_rows_cols


class PatchEmbed(nn.Module):
    def __init__(self, config: VisionConfig) -> None:
        super().__init__()
        self.config = config
        kernel = (config.temporal_patch_size, config.patch_size, config.patch_size)
        self.proj = nn.Conv3d(config.in_channels, config.hidden_size, kernel, stride=kernel)

    def forward(self, pixels: Tensor) -> Tensor:
        c = self.config
        weight = self.proj.weight.reshape(c.hidden_size, -1)
        return F.linear(pixels.to(weight.dtype), weight, self.proj.bias)


@dataclass
class VisionBatch:
    """Per-patch metadata of a packed run, computed on the host; padding patches have
    segment -1 and attend only to themselves."""

    tap_index: Tensor  # [P, 4] int64 position-table entries
    tap_weight: Tensor  # [P, 4] their bilinear weights
    cos: Tensor  # [P, head_dim] 2-D rotary
    sin: Tensor  # [P, head_dim]
    segment: Tensor  # [P] int32 image-frame id of each patch, -1 padding


class VisionAttention(nn.Module):
    def __init__(self, config: VisionConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.proj = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, spans: Sequence[int] | Tensor) -> Tensor:
        n = x.shape[0]
        q, k, v = self.qkv(x).view(n, 3, self.num_heads, self.head_dim).unbind(1)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        if isinstance(spans, Tensor):  # a boolean [P, P] mask: one packed attention
            o = F.scaled_dot_product_attention(
                q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), attn_mask=spans
            )
            return self.proj(o.transpose(0, 1).reshape(n, -1))
        outs = []
        for qs, ks, vs in zip(q.split(spans), k.split(spans), v.split(spans), strict=True):
            o = F.scaled_dot_product_attention(
                qs.transpose(0, 1), ks.transpose(0, 1), vs.transpose(0, 1)
            )
            outs.append(o.transpose(0, 1))
        return self.proj(torch.cat(outs).reshape(n, -1))


class VisionBlock(nn.Module):
    def __init__(self, config: VisionConfig) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(config.hidden_size, eps=1e-6)
        self.norm2 = nn.LayerNorm(config.hidden_size, eps=1e-6)
        self.attn = VisionAttention(config)
        self.mlp = VisionMlp(config.hidden_size, config.intermediate_size, config.hidden_act)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, spans: Sequence[int] | Tensor) -> Tensor:
        x = x + self.attn(self.norm1(x), cos, sin, spans)
        return x + self.mlp(self.norm2(x))


class VisionMlp(nn.Module):
    def __init__(self, hidden: int, intermediate: int, act: str) -> None:
        super().__init__()
        self.linear_fc1 = nn.Linear(hidden, intermediate)
        self.linear_fc2 = nn.Linear(intermediate, hidden)
        self.act = activation(act)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear_fc2(self.act(self.linear_fc1(x)))


class PatchMerger(nn.Module):
    def __init__(self, config: VisionConfig, out_size: int) -> None:
        super().__init__()
        self.merged = config.hidden_size * config.spatial_merge_size**2
        self.norm = nn.LayerNorm(config.hidden_size, eps=1e-6)
        self.linear_fc1 = nn.Linear(self.merged, self.merged)
        self.linear_fc2 = nn.Linear(self.merged, out_size)

    def forward(self, x: Tensor) -> Tensor:
        x = self.norm(x).reshape(-1, self.merged)
        return self.linear_fc2(F.gelu(self.linear_fc1(x)))


class VisionEncoder(nn.Module):
    """``forward(pixels [patches, C*T*P*P], grids) -> features [patches / merge**2, out]``;
    ``text_hidden`` is the output width when ``out_hidden_size`` is 0."""

    def __init__(self, config: VisionConfig, text_hidden: int = 0) -> None:
        super().__init__()
        self.config = config
        self.out_size = config.out_hidden_size or text_hidden
        if self.out_size <= 0:
            raise ValueError("vision out_hidden_size is 0 and no text hidden size was given")
        self.patch_embed = PatchEmbed(config)
        self.pos_embed = nn.Embedding(config.num_position_embeddings, config.hidden_size)
        self.side = int(config.num_position_embeddings**0.5)
        self.blocks = nn.ModuleList(VisionBlock(config) for _ in range(config.num_hidden_layers))
        self.merger = PatchMerger(config, self.out_size)
        head_dim = config.hidden_size // config.num_attention_heads
        quarter = head_dim // 2
        # CPU tensor, not a buffer: a meta-device model still needs real frequencies
        steps = torch.arange(0, quarter, 2, device="cpu").float()
        self.inv_freq = 1.0 / config.rope_theta ** (steps / quarter)

    def forward(self, pixels: Tensor, grids: Sequence[ImageGrid]) -> Tensor:
        merge = self.config.spatial_merge_size
        expected = sum(g.num_patches for g in grids)
        if pixels.shape[0] != expected:
            raise ValueError(f"pixels have {pixels.shape[0]} patches; the grids need {expected}")
        x = self.patch_embed(pixels)
        x = x + self._positions(grids, merge, x.device).to(x.dtype)
        cos, sin = self._rotary(grids, merge, x.device)
        # attention stays within one frame of one image
        spans = [g.h * g.w for g in grids for _ in range(g.t)]
        for block in self.blocks:
            x = block(x, cos, sin, spans)
        return self.merger(x)

    def metadata(
        self, grids: Sequence[ImageGrid], capacity: int = 0, device: torch.device | str = "cpu"
    ) -> VisionBatch:
        """Host-side metadata for ``grids`` packed in order, padded to ``capacity`` patches."""
        merge = self.config.spatial_merge_size
        used = sum(g.num_patches for g in grids)
        capacity = capacity or used
        if used > capacity:
            raise ValueError(f"images need {used} patches; the program holds {capacity}")
        head_dim = self.config.hidden_size // self.config.num_attention_heads
        index = torch.zeros(capacity, 4, dtype=torch.int64)
        weight = torch.zeros(capacity, 4)
        cos = torch.ones(capacity, head_dim)
        sin = torch.zeros(capacity, head_dim)
        segment = torch.full((capacity,), -1, dtype=torch.int32)
        if grids:
            taps = [interpolation_taps(g, merge, self.side) for g in grids]
            index[:used] = torch.cat([t[0] for t in taps])
            weight[:used] = torch.cat([t[1] for t in taps])
            c, s = self._rotary(grids, merge, torch.device("cpu"))
            cos[:used], sin[:used] = c, s
            frames = [g.h * g.w for g in grids for _ in range(g.t)]
            ids = torch.arange(len(frames), dtype=torch.int32)
            segment[:used] = ids.repeat_interleave(torch.tensor(frames))
        return VisionBatch(*(t.to(device) for t in (index, weight, cos, sin, segment)))

    def forward_packed(self, pixels: Tensor, batch: VisionBatch) -> Tensor:
        """Static-shape forward over a padded run (padding features are meaningless)."""
        x = self.patch_embed(pixels)
        table = self.pos_embed(batch.tap_index)
        x = x + (table * batch.tap_weight[:, :, None].to(table.dtype)).sum(1).to(x.dtype)
        seg = batch.segment
        mask = (seg[:, None] == seg[None, :]) & (seg[:, None] >= 0)
        mask = mask | torch.eye(seg.shape[0], dtype=torch.bool, device=seg.device)
        for block in self.blocks:
            x = block(x, batch.cos, batch.sin, mask)
        return self.merger(x)

    def _positions(self, grids: Sequence[ImageGrid], merge: int, device: torch.device) -> Tensor:
        taps = [interpolation_taps(g, merge, self.side) for g in grids]
        index = torch.cat([t[0] for t in taps]).to(device)
        weight = torch.cat([t[1] for t in taps]).to(device)
        return (self.pos_embed(index) * weight[:, :, None].to(self.pos_embed.weight.dtype)).sum(1)

    def _rotary(
        self, grids: Sequence[ImageGrid], merge: int, device: torch.device
    ) -> tuple[Tensor, Tensor]:
        coords = [patch_rows_cols(g, merge) for g in grids]
        rows = torch.cat([c[0] for c in coords]).to(device)
        cols = torch.cat([c[1] for c in coords]).to(device)
        inv_freq = self.inv_freq.to(device)
        angles = torch.cat([rows[:, None] * inv_freq, cols[:, None] * inv_freq], dim=-1).float()
        angles = torch.cat([angles, angles], dim=-1)  # [patches, head_dim]
        return angles.cos(), angles.sin()


def _rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate-half rope over the whole head, in fp32."""
    dtype = x.dtype
    x = x.float()
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return (x * cos[:, None] + rotated * sin[:, None]).to(dtype)
