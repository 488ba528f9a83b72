"""Model families: how each published checkpoint layout maps onto the shared model code."""

from __future__ import annotations

from ignition.model.families.base import CheckpointLayout, ModelFamily, TensorSource
from ignition.model.families.registry import (
    families,
    family_for_checkpoint,
    family_for_model_type,
    get_family,
    register,
)

__all__ = [
    "CheckpointLayout",
    "ModelFamily",
    "TensorSource",
    "families",
    "family_for_checkpoint",
    "family_for_model_type",
    "get_family",
    "register",
]
