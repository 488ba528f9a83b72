"""What the embedded default is: its architecture, its training hyper-parameters, its init.

The architecture is Qwen3.8-Flash-Next's (``qwen4_exp``, shared/spec/qwen38-flash.md) at toy
size, written as the ``Qwen4ExpTextConfig`` keys transformers saves, with every released
part present and exercised: eight layers in the 3 linear : 1 indexed attention pattern,
four gated hyper-connection streams, 4 experts top-2 with a gated shared expert, PLE n-grams
on one linear-attention layer (layer 2, as released) with a table small enough to ship, a
QSA index budget of 64 tokens in blocks of 4 (below typical prompt lengths, so selection is
active in training and serving) and one MTP layer. Sized for CPU serving (a batch-4 decode
step in milliseconds with the reference kernels) and for training on one CPU thread in about
an hour (1,100 steps: 320 left the perplexity at 95, 1,100 bring it to 42); fp32 weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from ignition.model.layers.gdn import GatedDeltaNet
from ignition.model.layers.ngram_ple import NgramPle
from ignition.model.model import HybridModel

LINEAR, INDEXED = "linear_attention", "indexed_attention"

ARCHITECTURE: dict[str, Any] = dict(
    vocab_size=4096,
    hidden_size=128,
    num_hidden_layers=8,
    layer_types=[LINEAR, LINEAR, LINEAR, INDEXED] * 2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=32,
    rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    linear_num_key_heads=4,
    linear_num_value_heads=4,
    linear_key_head_dim=32,
    linear_value_head_dim=32,
    linear_conv_kernel_dim=4,
    output_gate_type="sigmoid",
    num_experts=4,
    num_experts_per_tok=2,
    moe_intermediate_size=128,
    shared_expert_intermediate_size=256,
    norm_topk_prob=True,
    hc_count=4,
    hc_lowrank=16,
    ple_layer_ids=[2],
    ple_embed_dim=64,
    ple_conv_kernel_size=4,
    ngram_size=3,
    heads_per_ngram=4,
    ngram_vocab_size_base=4096,
    make_ngram_vocab_size_divisible_by=8,
    seed=1234,
    split_ngram_parts=4,
    indexer_n_heads=4,
    indexer_kv_heads=1,
    indexer_head_dim=32,
    indexer_budget=64,
    indexer_compress_ratio=4,
    rms_norm_eps=1e-6,
    max_position_embeddings=8192,
    tie_word_embeddings=False,
)

# Output projections of residual branches start smaller (GPT-2's 1/sqrt(2L)).
_RESIDUAL_OUTPUTS = ("o_proj.weight", "out_proj.weight", "down_proj.weight")


@dataclass(frozen=True)
class TinyRecipe:
    """Every number of a training run; the model card prints it."""

    architecture: dict[str, Any] = field(default_factory=lambda: dict(ARCHITECTURE))
    seed: int = 0
    seq_len: int = 256
    batch_size: int = 8
    num_steps: int = 1100
    warmup_steps: int = 20
    learning_rate: float = 3e-3
    min_learning_rate: float = 3e-4
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    mtp_weight: float = 0.5
    balance_weight: float = 0.01
    num_threads: int = 1

    def with_overrides(self, **changes: Any) -> TinyRecipe:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def text_config(self, special_ids: dict[str, int]) -> dict[str, Any]:
        """The ``Qwen4ExpTextConfig`` keys: the architecture plus the tokenizer's ids (EOS
        first: it also bounds the PLE n-gram segments)."""
        values = dict(self.architecture)
        values["layer_types"] = list(values["layer_types"])
        values["num_hidden_layers"] = len(values["layer_types"])
        values.update(
            bos_token_id=None,
            eos_token_id=[special_ids["<|im_end|>"], special_ids["<|endoftext|>"]],
            pad_token_id=special_ids["<|pad|>"],
        )
        return values

    def learning_rate_at(self, step: int) -> float:
        """Linear warmup, then cosine decay to ``min_learning_rate`` at the last step."""
        if step < self.warmup_steps:
            return self.learning_rate * (step + 1) / self.warmup_steps
        progress = (step - self.warmup_steps) / max(1, self.num_steps - self.warmup_steps)
        cosine = 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
        return self.min_learning_rate + (self.learning_rate - self.min_learning_rate) * cosine


@torch.no_grad()
def init_weights_(model: HybridModel, seed: int) -> HybridModel:
    """Small normal matrices (hyper-connection mixing included: every stream starts at mix
    weight 1/2 and injection 1), norms at their module defaults (identity), FLA-style GDN
    decays, GDN convolutions uniform and the PLE convolution at zero (transformers' init)."""
    generator = torch.Generator().manual_seed(seed)
    num_layers = model.config.num_hidden_layers
    for name, param in model.named_parameters():
        if name.endswith(_RESIDUAL_OUTPUTS):
            param.normal_(0.0, 0.02 / math.sqrt(2 * num_layers), generator=generator)
        elif param.dim() >= 2:
            param.normal_(0.0, 0.02, generator=generator)
    for module in model.modules():
        if isinstance(module, GatedDeltaNet):
            _init_decay_(module, generator)
            bound = 1.0 / math.sqrt(module.conv1d.weight.shape[-1])
            module.conv1d.weight.uniform_(-bound, bound, generator=generator)
        elif isinstance(module, NgramPle):
            module.conv1d.weight.zero_()
    return model


def _init_decay_(gdn: GatedDeltaNet, generator: torch.Generator) -> None:
    """A in [1, 16] and dt in [1e-3, 1e-1] log-uniform: heads of short and long memory."""
    heads = gdn.A_log.shape[0]
    gdn.A_log.copy_(torch.empty(heads).uniform_(1.0, 16.0, generator=generator).log())
    log_dt = torch.empty(heads).uniform_(math.log(1e-3), math.log(1e-1), generator=generator)
    dt = log_dt.exp()
    gdn.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # softplus^-1(dt)
