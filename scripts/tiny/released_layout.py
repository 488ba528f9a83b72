"""The embedded default as Qwen3.8-Flash-Next is published: config.json and tensor names.

transformers' ``Qwen4ExpForCausalLM`` is the authority on the trunk: its config class writes
config.json and its ``save_pretrained`` writes the tensors (per-expert projections, the PLE
table in ``shard_N`` pieces), which land under ``model.language_model.*`` as in the released
checkpoint (transformers' qwen4_exp_text conversion strips that prefix on load). The MTP head
has no transformers class; its tensors are named as vLLM's Qwen4Exp MTP loads them (a trunk
indexed-attention layer's names under ``mtp.layers.0``, the mixer, ``fc_embedding``,
``fc_hidden`` and the two pre-fc norms), with transformers' own decoder layer and gated
residual supplying the names and shapes.

Our model's parameters reach those tensors through the family's own layout, inverted: every
layout source is a gather (row slices, query/gate halves, one expert of a fused tensor, row
shards), so building it from element indices instead of weights says where each parameter
element lives in the checkpoint.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import Tensor

from ignition.model.families.qwen4_exp import QWEN4_EXP
from ignition.model.model import HybridModel
from ignition.model.weights import CONFIG_FILE, WEIGHTS_FILE

TRUNK, RELEASED_TRUNK = "model.", "model.language_model."


@dataclass
class ReleasedTemplate:
    """transformers' model for a text config, and the MTP tensors beside it (fp32, CPU)."""

    text: dict[str, Any]
    reference: torch.nn.Module  # Qwen4ExpForCausalLM
    mtp: dict[str, Tensor]

    @classmethod
    def build(cls, text: dict[str, Any], num_mtp_layers: int = 1) -> ReleasedTemplate:
        import transformers as tf
        from transformers.models.qwen4_exp import modeling_qwen4_exp as reference

        config = tf.Qwen4ExpTextConfig(**text)
        model = tf.Qwen4ExpForCausalLM(config).eval()
        mtp: dict[str, Tensor] = {}
        hidden, streams = config.hidden_size, config.hc_count
        for i in range(num_mtp_layers):
            layer = reference.Qwen4ExpTextDecoderLayer(
                config, config.layer_types.index("indexed_attention")
            )
            mtp |= {f"mtp.layers.{i}.{k}": v for k, v in layer.state_dict().items()}
        mixer = reference.Qwen4ExpTextGatedResidual(config, use_combine=False)
        mtp |= {f"mtp.hyper_connection_mixer.{k}": v for k, v in mixer.state_dict().items()}
        for name in ("fc_embedding", "fc_hidden"):
            mtp[f"mtp.{name}.weight"] = torch.zeros(hidden, hidden)
        mtp["mtp.pre_fc_norm_embedding.weight"] = torch.zeros(hidden)
        mtp["mtp.pre_fc_norm_hidden.weight"] = torch.zeros(streams * hidden)
        return cls(text, model, mtp)

    def tensor_names(self) -> frozenset[str]:
        return frozenset(self.reference.state_dict()) | frozenset(self.mtp)

    def config_json(self) -> dict[str, Any]:
        return self.reference.config.to_dict()

    def empty_model(self) -> HybridModel:
        """Our model of this config, parsed by the qwen4_exp family as a checkpoint would be."""
        raw = json.loads(self.reference.config.to_json_string())
        config = QWEN4_EXP.parse_config(raw, "<tiny recipe>", self.tensor_names())
        return QWEN4_EXP.model_class()(config)


def released_tensors(model: HybridModel, template: ReleasedTemplate) -> dict[str, Tensor]:
    """Every tensor of the template (in-memory names) filled from ``model``'s parameters;
    saved constants (hash buffers, the final mixer's unused injection) keep the template's."""
    names = template.tensor_names()
    layout = QWEN4_EXP.layout(model, names)
    out = {k: v.detach().clone() for k, v in template.reference.state_dict().items()}
    out |= {k: v.detach().clone() for k, v in template.mtp.items()}
    covered = {k: torch.zeros(v.numel(), dtype=torch.long) for k, v in out.items()}
    params = dict(model.named_parameters())
    for name, source in layout.sources.items():
        offsets, start = [], 0
        for shape in source.shapes:
            offsets.append(start)
            start += int(torch.Size(shape).numel())
        indices = [
            torch.arange(o, o + torch.Size(s).numel()).view(s)
            for o, s in zip(offsets, source.shapes, strict=True)
        ]
        where = source.build(indices).reshape(-1)
        values = params[name].detach().reshape(-1)
        for tensor_name, offset, shape in zip(source.names, offsets, source.shapes, strict=True):
            size = torch.Size(shape).numel()
            mine = (where >= offset) & (where < offset + size)
            flat = out[tensor_name].view(-1)
            flat[where[mine] - offset] = values[mine].to(flat.dtype)
            covered[tensor_name][where[mine] - offset] += 1
    for tensor_name, counts in covered.items():
        constant = any(tensor_name.endswith(s) for s in layout.ignored_suffixes)
        if not constant and not bool((counts == 1).all()):
            raise ValueError(f"{tensor_name}: not every element written exactly once")
    return out


def save_released(model: HybridModel, template: ReleasedTemplate, out_dir: Path) -> None:
    """config.json and model.safetensors (trunk as transformers saves it, under
    ``model.language_model.``, then ``lm_head`` and ``mtp.*``) in ``out_dir``."""
    tensors = released_tensors(model, template)
    trunk = {k: v for k, v in tensors.items() if not k.startswith("mtp.")}
    reference = template.reference
    reference.load_state_dict(trunk, strict=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        reference.save_pretrained(tmp)
        saved: dict[str, Tensor] = {}
        with safe_open(str(Path(tmp) / WEIGHTS_FILE), "pt") as f:
            for key in f.keys():  # noqa: SIM118 (safe_open is not a mapping)
                name = RELEASED_TRUNK + key[len(TRUNK) :] if key.startswith(TRUNK) else key
                saved[name] = f.get_tensor(key)
        config = json.loads((Path(tmp) / CONFIG_FILE).read_text())
    saved |= {k: v for k, v in tensors.items() if k.startswith("mtp.")}
    saved = {k: v.contiguous() for k, v in sorted(saved.items())}
    (out_dir / CONFIG_FILE).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    save_file(saved, str(out_dir / WEIGHTS_FILE), metadata={"format": "pt"})
