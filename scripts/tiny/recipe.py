"""What the embedded default is: its architecture, its training hyper-parameters, its init.

Sized for CPU serving (a batch-4 decode step in milliseconds, a 4096-token prefill well
under a second with the reference kernels) and for training on 2 cores in about 25 minutes:
hidden 128, eight layers in the 3 gdn : 1 qsa pattern, 4 experts top-2 with a shared
expert, two hyper-connection streams, per-layer embeddings and one MTP layer, fp32 weights
(about 17 MB with the tied embedding).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import nn

from ignition.model.config import Qwen38Config
from ignition.model.layers.gdn import GatedDeltaNet
from ignition.model.model import HybridModel

ARCHITECTURE: dict[str, Any] = dict(
    vocab_size=4096,
    hidden_size=128,
    layer_types=("gdn", "gdn", "gdn", "qsa") * 2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=32,
    rotary_dim=16,
    rope_theta=10000.0,
    linear_num_heads=4,
    linear_key_head_dim=32,
    linear_value_head_dim=32,
    conv_kernel=4,
    num_experts=4,
    num_experts_per_tok=2,
    moe_intermediate_size=128,
    shared_expert_intermediate_size=256,
    hc_streams=2,
    ple_dim=16,
    mtp_num_layers=1,
    vision=None,
    rms_norm_eps=1e-6,
    max_position_embeddings=8192,
    tie_word_embeddings=True,
)

# Output projections of residual branches start smaller (GPT-2's 1/sqrt(2L)).
_RESIDUAL_OUTPUTS = ("o_proj.weight", "out_proj.weight", "down_proj.weight")


@dataclass(frozen=True)
class TinyRecipe:
    """Every number of a training run; the model card prints it."""

    architecture: dict[str, Any] = field(default_factory=lambda: dict(ARCHITECTURE))
    seed: int = 0
    seq_len: int = 256
    batch_size: int = 16
    num_steps: int = 700
    warmup_steps: int = 40
    learning_rate: float = 3e-3
    min_learning_rate: float = 3e-4
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    mtp_weight: float = 0.5
    balance_weight: float = 0.01
    num_threads: int = 2

    def with_overrides(self, **changes: Any) -> TinyRecipe:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def model_config(self, special_ids: dict[str, int]) -> Qwen38Config:
        """The checkpoint's config: the architecture plus the tokenizer's special token ids."""
        values = dict(self.architecture)
        values["num_hidden_layers"] = len(values["layer_types"])
        values["layer_types"] = list(values["layer_types"])
        values.update(
            bos_token_id=None,
            eos_token_id=[special_ids["<|im_end|>"], special_ids["<|endoftext|>"]],
            pad_token_id=special_ids["<|pad|>"],
            image_token_id=special_ids["<|image|>"],
            torch_dtype="float32",
        )
        return Qwen38Config.from_dict(values, source="<tiny recipe>")

    def learning_rate_at(self, step: int) -> float:
        """Linear warmup, then cosine decay to ``min_learning_rate`` at the last step."""
        if step < self.warmup_steps:
            return self.learning_rate * (step + 1) / self.warmup_steps
        progress = (step - self.warmup_steps) / max(1, self.num_steps - self.warmup_steps)
        cosine = 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
        return self.min_learning_rate + (self.learning_rate - self.min_learning_rate) * cosine


@torch.no_grad()
def init_weights_(model: HybridModel, seed: int) -> HybridModel:
    """Small normal matrices, unit norms, identity hyper-connections, FLA-style GDN decays."""
    generator = torch.Generator().manual_seed(seed)
    num_layers = model.config.num_hidden_layers
    for name, param in model.named_parameters():
        # Vectors (norms, decays, hyper-connection weights) keep their module defaults.
        if name.endswith(_RESIDUAL_OUTPUTS):
            param.normal_(0.0, 0.02 / math.sqrt(2 * num_layers), generator=generator)
        elif param.dim() >= 2 and "_hc." not in name:
            param.normal_(0.0, 0.02, generator=generator)
    for module in model.modules():
        if isinstance(module, GatedDeltaNet):
            _init_decay_(module, generator)
        elif isinstance(module, nn.Conv1d):
            bound = 1.0 / math.sqrt(module.weight.shape[-1])
            module.weight.uniform_(-bound, bound, generator=generator)
    return model


def _init_decay_(gdn: GatedDeltaNet, generator: torch.Generator) -> None:
    """A in [1, 16] and dt in [1e-3, 1e-1] log-uniform: heads of short and long memory."""
    heads = gdn.A_log.shape[0]
    gdn.A_log.copy_(torch.empty(heads).uniform_(1.0, 16.0, generator=generator).log())
    log_dt = torch.empty(heads).uniform_(math.log(1e-3), math.log(1e-1), generator=generator)
    dt = log_dt.exp()
    gdn.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # softplus^-1(dt)
