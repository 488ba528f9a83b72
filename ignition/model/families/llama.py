"""Llama 3.x (``llama``): a dense attention-only decoder through the same model code; the GDN
fields are unused (set to 1) and there is no MTP head, so no speculation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import nn

from ignition.model.config import ConfigError, ModelConfig, RopeScaling
from ignition.model.families.base import CheckpointLayout, ModelFamily, TensorSource, as_dtype
from ignition.model.families.hf_text import TextReader
from ignition.model.families.registry import register


class LlamaFamily(ModelFamily):
    name = "llama"
    model_types = ("llama",)
    recipe = "llama32"
    description = "Llama 3.x dense GQA transformer (attention only, no draft head)"

    def parse_config(
        self, raw: Mapping[str, Any], source: str, tensor_names: frozenset[str]
    ) -> ModelConfig:
        r = TextReader(raw, "", source)
        r.unsupported_true("attention_bias", "mlp_bias")
        hidden = r.int("hidden_size")
        num_heads = r.int("num_attention_heads")
        head_dim = r.int("head_dim", hidden // num_heads)
        num_layers = r.int("num_hidden_layers")
        rope = r.rope()
        rope_type = rope.get("rope_type", "default")
        if rope_type not in ("default", "llama3"):
            raise ConfigError(
                source,
                f"key 'rope_parameters.rope_type' = {rope_type!r}: expected default or llama3",
            )
        scaling = None
        if rope_type == "llama3":
            try:
                scaling = RopeScaling(
                    factor=float(rope["factor"]),
                    low_freq_factor=float(rope["low_freq_factor"]),
                    high_freq_factor=float(rope["high_freq_factor"]),
                    original_max_position_embeddings=int(rope["original_max_position_embeddings"]),
                )
            except KeyError as exc:
                raise ConfigError(source, f"key 'rope_parameters' lacks {exc.args[0]!r}") from None
        values: dict[str, Any] = dict(
            model_type="llama",
            vocab_size=r.int("vocab_size"),
            hidden_size=hidden,
            num_hidden_layers=num_layers,
            layer_types=("qsa",) * num_layers,
            num_attention_heads=num_heads,
            num_key_value_heads=r.int("num_key_value_heads", num_heads),
            head_dim=head_dim,
            rotary_dim=head_dim,
            rope_theta=float(rope.get("rope_theta", 10_000.0)),
            rope_scaling=scaling,
            linear_num_heads=1,
            linear_key_head_dim=1,
            linear_value_head_dim=1,
            conv_kernel=2,
            mlp_kind="dense",
            intermediate_size=r.int("intermediate_size"),
            num_experts=0,
            num_experts_per_tok=0,
            moe_intermediate_size=0,
            shared_expert_intermediate_size=0,
            hc_streams=0,
            mtp_num_layers=0,
            vision=None,
            rms_norm_eps=r.float("rms_norm_eps", 1e-5),
            hidden_act=r.activation("hidden_act"),
            max_position_embeddings=r.int("max_position_embeddings", 131072),
            tie_word_embeddings=r.flag("tie_word_embeddings", False),
            torch_dtype=as_dtype(raw, source),
            qk_norm=False,
            attn_output_gate=False,
            **r.token_ids(raw),
        )
        return ModelConfig.from_dict(values, source=source)

    def layout(self, model: nn.Module, tensor_names: frozenset[str]) -> CheckpointLayout:
        sources = {
            name: TensorSource.same(
                name if name.startswith("lm_head.") else f"model.{name}", param.shape
            )
            for name, param in model.named_parameters()
        }
        return CheckpointLayout(sources, ignored_prefixes=("model.rotary_emb.",))


LLAMA = register(LlamaFamily())
