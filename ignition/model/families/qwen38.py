"""Qwen3.8 Flash, the seed family: config.json is :class:`Qwen38Config` itself.

Its checkpoints name tensors exactly as the shared model's modules, under ``model.`` for the
trunk and unprefixed for ``lm_head.`` and ``mtp.``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import nn

from ignition.model.config import Qwen38Config
from ignition.model.families.base import CheckpointLayout, ModelFamily, TensorSource
from ignition.model.families.registry import register

_UNPREFIXED = ("lm_head.", "mtp.")


def checkpoint_name(module_name: str) -> str:
    """Internal parameter name -> Qwen3.8 Flash checkpoint tensor name."""
    return module_name if module_name.startswith(_UNPREFIXED) else f"model.{module_name}"


class Qwen38Family(ModelFamily):
    name = "qwen38"
    model_types = ("qwen38",)
    recipe = "qwen38"
    description = "Qwen3.8 Flash: GDN + QSA, MoE, hyper-connections, per-layer embeddings, MTP"

    def parse_config(
        self, raw: Mapping[str, Any], source: str, tensor_names: frozenset[str]
    ) -> Qwen38Config:
        return Qwen38Config.from_dict(raw, source=source)

    def layout(self, model: nn.Module, tensor_names: frozenset[str]) -> CheckpointLayout:
        # named_parameters drops the tied lm_head (it is the embedding), as HF checkpoints do.
        return CheckpointLayout(
            {
                name: TensorSource.same(checkpoint_name(name), param.shape)
                for name, param in model.named_parameters()
            }
        )


QWEN38 = register(Qwen38Family())
