"""Triton gated delta rule: the chunked prompt kernel and the recurrent verify kernel."""

from __future__ import annotations

from ignition.kernels.gated_delta_rule.triton_chunk import chunk_gated_delta_rule
from ignition.kernels.gated_delta_rule.triton_recurrent import recurrent_gated_delta_rule

__all__ = ["chunk_gated_delta_rule", "recurrent_gated_delta_rule"]
