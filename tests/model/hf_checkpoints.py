"""Tiny random Qwen3.5 / Llama checkpoints written by transformers' own classes.

Each writer builds the model with transformers, gives it non-trivial random weights (its
default init leaves norms at zero and gates near their fixed points, which would hide layout
bugs), ``save_pretrained``s it and, for Qwen3.5, adds random ``mtp.*`` tensors named as the
published checkpoints name them: transformers does not implement the MTP head, so its own
full-attention decoder layer supplies the layer's names and shapes. The embedded checkpoint's
tokenizer rides along so that ``ignition build`` can validate on real text.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

ASSET = Path(__file__).resolve().parents[2] / "ignition" / "assets" / "qwen38-tiny"
VOCAB_SIZE = 4096  # the embedded tokenizer's
EOS_TOKEN_ID = 2
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class Variant:
    """One way a published checkpoint can be laid out."""

    moe: bool = False
    mtp: bool = True
    multimodal: bool = True  # Qwen3_5ForConditionalGeneration, else the text-only class
    fused_experts: bool = False
    sharded: bool = False
    tie_word_embeddings: bool = False
    dtype: str = "float32"
    seed: int = 0
    vocab_size: int = VOCAB_SIZE
    hidden_act: str = "silu"  # config.json's, for the MLPs and the GDN short convolution
    # image, video, vision start, vision end token ids (the multimodal class only)
    vision_tokens: tuple[int, int, int, int] = (5, 6, 7, 8)


def text_config(moe: bool, tie: bool, vocab_size: int = VOCAB_SIZE) -> dict:
    config = dict(
        vocab_size=vocab_size,
        hidden_size=64,
        num_hidden_layers=4,
        layer_types=["linear_attention"] * 3 + ["full_attention"],
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=16,
        linear_value_head_dim=8,
        linear_conv_kernel_dim=4,
        max_position_embeddings=4096,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10000.0,
            "partial_rotary_factor": 0.5,
            "mrope_section": [2, 1, 1],
            "mrope_interleaved": True,
        },
        tie_word_embeddings=tie,
        eos_token_id=EOS_TOKEN_ID,
        mtp_num_hidden_layers=1,
    )
    if moe:
        config.update(
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=48,
        )
    else:
        config.update(intermediate_size=96)
    return config


VISION = dict(
    depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=4
)


@torch.no_grad()
def randomize(model: torch.nn.Module, seed: int, zero_centred: bool) -> None:
    """Normal weights at 1/sqrt(fan_in), norms around their identity, decays spread out."""
    generator = torch.Generator().manual_seed(seed)
    for name, param in model.named_parameters():
        if "visual" in name:
            continue
        noise = torch.randn(param.shape, generator=generator)
        if "norm" in name:
            value = noise * 0.2
            if "linear_attn.norm" in name or not zero_centred:
                value = value + 1.0
        elif name.endswith("A_log"):
            value = torch.rand(param.shape, generator=generator) * 2.0 - 1.0
        elif name.endswith("dt_bias"):
            value = noise * 0.5
        elif "embed_tokens" in name:
            value = noise
        else:
            value = noise / param.shape[-1] ** 0.5
        param.copy_(value.to(param.dtype))


def write_qwen35(path: Path, variant: Variant = Variant()) -> torch.nn.Module:
    """Save a tiny Qwen3.5 (dense or MoE) in ``variant``'s layout; returns the fp32 model."""
    import transformers as tf

    text = text_config(variant.moe, variant.tie_word_embeddings, variant.vocab_size)
    text["hidden_act"] = variant.hidden_act
    if variant.multimodal:
        cls = (
            tf.Qwen3_5MoeForConditionalGeneration
            if variant.moe
            else tf.Qwen3_5ForConditionalGeneration
        )
        config_cls = tf.Qwen3_5MoeConfig if variant.moe else tf.Qwen3_5Config
        config = config_cls(
            text_config=text,
            vision_config=VISION,
            image_token_id=variant.vision_tokens[0],
            video_token_id=variant.vision_tokens[1],
            vision_start_token_id=variant.vision_tokens[2],
            vision_end_token_id=variant.vision_tokens[3],
            tie_word_embeddings=variant.tie_word_embeddings,
        )
    else:
        cls = tf.Qwen3_5MoeForCausalLM if variant.moe else tf.Qwen3_5ForCausalLM
        config_cls = tf.Qwen3_5MoeTextConfig if variant.moe else tf.Qwen3_5TextConfig
        config = config_cls(**text)
    torch.manual_seed(variant.seed)
    model = cls(config).eval()
    randomize(model, variant.seed, zero_centred=True)
    model.to(DTYPES[variant.dtype]).save_pretrained(
        path, max_shard_size="100KB" if variant.sharded else "5GB"
    )
    model.float()
    _copy_tokenizer(path)
    if variant.mtp:
        _add_mtp(path, model, variant)
    if variant.fused_experts:
        rewrite_tensors(path, fuse_experts)
    return model


def _copy_tokenizer(path: Path) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(ASSET / name, path / name)


def _add_mtp(path: Path, model: torch.nn.Module, variant: Variant) -> None:
    """mtp.* tensors as the published checkpoints carry them, in a shard of their own."""
    import transformers as tf

    text = model.config.text_config if variant.multimodal else model.config
    layer_cls = (
        tf.models.qwen3_5_moe.modeling_qwen3_5_moe.Qwen3_5MoeDecoderLayer
        if variant.moe
        else tf.models.qwen3_5.modeling_qwen3_5.Qwen3_5DecoderLayer
    )
    full_index = text.layer_types.index("full_attention")
    layer = layer_cls(text, full_index)
    randomize(layer, variant.seed + 1, zero_centred=True)
    hidden = text.hidden_size
    generator = torch.Generator().manual_seed(variant.seed + 2)
    tensors = {f"mtp.layers.0.{k}": v for k, v in layer.state_dict().items()}
    tensors["mtp.fc.weight"] = (
        torch.randn(hidden, 2 * hidden, generator=generator) / (2 * hidden) ** 0.5
    )
    for norm in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
        tensors[f"mtp.{norm}.weight"] = torch.randn(hidden, generator=generator) * 0.2
    dtype = DTYPES[variant.dtype]
    tensors = {k: v.to(dtype).contiguous() for k, v in tensors.items()}
    save_file(tensors, str(path / "mtp.safetensors"), metadata={"format": "pt"})
    index = path / "model.safetensors.index.json"
    if index.exists():
        data = json.loads(index.read_text())
        data["weight_map"].update({name: "mtp.safetensors" for name in tensors})
        index.write_text(json.dumps(data, indent=2))


def randomize_vision(model, seed: int) -> dict[str, torch.Tensor]:
    """Non-trivial tower weights (transformers' init leaves them small), returned by
    checkpoint name so a test can write them into the saved safetensors."""
    generator = torch.Generator().manual_seed(seed)
    out = {}
    with torch.no_grad():
        for name, param in model.model.visual.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            if "norm" in name:
                value = (1.0 if name.endswith("weight") else 0.0) + 0.2 * noise
            elif "pos_embed" in name:
                value = noise
            else:
                value = noise / param[0].numel() ** 0.5
            param.copy_(value)
            out[f"model.visual.{name}"] = value.clone()
    return out


def rewrite_tensors(path: Path, edit) -> None:
    """Apply ``edit`` to every tensor of the checkpoint (one dict), then write it back as the
    same number of shards with a fresh index (a single file stays a single file)."""
    index = path / "model.safetensors.index.json"
    if index.exists():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    else:
        files = sorted(p.name for p in path.glob("*.safetensors"))
    tensors: dict[str, torch.Tensor] = {}
    for name in files:
        tensors.update(load_file(path / name))
        (path / name).unlink()
    edit(tensors)
    names = sorted(tensors)
    if not index.exists():
        save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
        return
    shards = [f"model-{i + 1:05d}-of-{len(files):05d}.safetensors" for i in range(len(files))]
    weight_map = {name: shards[i % len(shards)] for i, name in enumerate(names)}
    for shard in shards:
        part = {n: tensors[n].contiguous() for n in names if weight_map[n] == shard}
        save_file(part, str(path / shard), metadata={"format": "pt"})
    index.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}, indent=2))


def fuse_experts(tensors: dict[str, torch.Tensor]) -> None:
    """Per-expert tensors -> the fused [E, 2I, H] gate_up_proj and [E, H, I] down_proj."""
    per_expert = [m for k in tensors if (m := re.match(r"(.*)\.experts\.(\d+)\.", k))]
    for prefix in sorted({m.group(1) for m in per_expert}):
        count = 1 + max(int(m.group(2)) for m in per_expert if m.group(1) == prefix)
        gate_up, down = [], []
        for e in range(count):
            base = f"{prefix}.experts.{e}"
            gate, up = (
                tensors.pop(f"{base}.gate_proj.weight"),
                tensors.pop(f"{base}.up_proj.weight"),
            )
            gate_up.append(torch.cat([gate, up], 0))
            down.append(tensors.pop(f"{base}.down_proj.weight"))
        tensors[f"{prefix}.experts.gate_up_proj"] = torch.stack(gate_up)
        tensors[f"{prefix}.experts.down_proj"] = torch.stack(down)


def write_llama(path: Path, seed: int = 0, hidden_act: str = "silu") -> torch.nn.Module:
    """Save a tiny Llama 3.2-style model (GQA, tied embeddings, llama3 rope scaling)."""
    import transformers as tf

    config = tf.LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        eos_token_id=EOS_TOKEN_ID,
        hidden_act=hidden_act,
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 32.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64,
        },
    )
    torch.manual_seed(seed)
    model = tf.LlamaForCausalLM(config).eval()
    randomize(model, seed, zero_centred=False)
    model.save_pretrained(path)
    _copy_tokenizer(path)
    return model


def write_qwen3_next(path: Path, seed: int = 0, hidden_act: str = "silu") -> torch.nn.Module:
    """Save a tiny Qwen3-Next (text-only, every layer MoE, no MTP head)."""
    import transformers as tf

    text = text_config(moe=True, tie=False) | {"hidden_act": hidden_act}
    text.pop("mtp_num_hidden_layers")
    text["rope_parameters"] = {
        "rope_type": "default",
        "rope_theta": 10000.0,
        "partial_rotary_factor": 0.5,
    }
    torch.manual_seed(seed)
    model = tf.Qwen3NextForCausalLM(tf.Qwen3NextConfig(**text)).eval()
    randomize(model, seed, zero_centred=True)
    model.save_pretrained(path)
    _copy_tokenizer(path)
    return model


def qwen4_exp_text_config(vocab_size: int = VOCAB_SIZE) -> dict:
    """A tiny Qwen3.8-Flash-Next text config: two PLE layers, a QSA index budget of 8 tokens
    in blocks of 4 (prompts of tens of tokens select), four streams, MoE."""
    config = text_config(moe=True, tie=False, vocab_size=vocab_size)
    config.pop("mtp_num_hidden_layers")
    config.update(
        hidden_size=32,
        layer_types=["linear_attention"] * 3 + ["indexed_attention"],
        output_gate_type="sigmoid",
        hc_count=4,
        hc_lowrank=8,
        ple_layer_ids=[1, 3],
        ple_embed_dim=16,
        ple_conv_kernel_size=3,
        ngram_size=3,
        heads_per_ngram=2,
        ngram_vocab_size_base=97,
        make_ngram_vocab_size_divisible_by=8,
        seed=11,
        split_ngram_parts=4,
        indexer_n_heads=8,
        indexer_kv_heads=1,
        indexer_head_dim=16,
        indexer_budget=8,
        indexer_compress_ratio=4,
    )
    return config


def write_qwen4_exp(
    path: Path,
    seed: int = 0,
    multimodal: bool = False,
    mtp: bool = False,
    hidden_act: str = "silu",
) -> torch.nn.Module:
    """Save a tiny Qwen4Exp (CausalLM, or ConditionalGeneration with a vision tower) with every
    parameter random, PLE tables included, and with ``mtp`` random ``mtp.*`` tensors named
    as vLLM's Qwen4Exp MTP loads them; returns the fp32 transformers model."""
    import transformers as tf

    text = qwen4_exp_text_config() | {"hidden_act": hidden_act}
    if multimodal:
        config = tf.Qwen4ExpConfig(
            text_config=text,
            vision_config=VISION | {"out_hidden_size": text["hidden_size"]},
            image_token_id=5,
            video_token_id=6,
            vision_start_token_id=7,
            vision_end_token_id=8,
        )
        cls = tf.Qwen4ExpForConditionalGeneration
    else:
        config, cls = tf.Qwen4ExpTextConfig(**text), tf.Qwen4ExpForCausalLM
    torch.manual_seed(seed)
    model = cls(config).eval()
    randomize(model, seed, zero_centred=True)
    model.save_pretrained(path)
    _copy_tokenizer(path)
    if mtp:
        _add_qwen4_exp_mtp(path, model.config.get_text_config(), seed)
    return model


def _add_qwen4_exp_mtp(path: Path, text, seed: int) -> None:
    """mtp.* tensors in their own file: transformers has no MTP head, so its own indexed
    attention layer and gated residual supply the layer's and the mixer's names and shapes."""
    from transformers.models.qwen4_exp import modeling_qwen4_exp as reference

    layer = reference.Qwen4ExpTextDecoderLayer(text, text.layer_types.index("indexed_attention"))
    mixer = reference.Qwen4ExpTextGatedResidual(text, use_combine=False)
    randomize(layer, seed + 1, zero_centred=True)
    randomize(mixer, seed + 2, zero_centred=True)
    hidden, streams = text.hidden_size, text.hc_count
    generator = torch.Generator().manual_seed(seed + 3)
    tensors = {f"mtp.layers.0.{k}": v for k, v in layer.state_dict().items()}
    tensors |= {f"mtp.hyper_connection_mixer.{k}": v for k, v in mixer.state_dict().items()}
    for name in ("fc_embedding", "fc_hidden"):
        tensors[f"mtp.{name}.weight"] = torch.randn(hidden, hidden, generator=generator) / 6
    tensors["mtp.pre_fc_norm_embedding.weight"] = torch.randn(hidden, generator=generator) / 5
    tensors["mtp.pre_fc_norm_hidden.weight"] = (
        torch.randn(streams * hidden, generator=generator) / 5
    )
    tensors = {k: v.contiguous() for k, v in tensors.items()}
    save_file(tensors, str(path / "mtp.safetensors"), metadata={"format": "pt"})
