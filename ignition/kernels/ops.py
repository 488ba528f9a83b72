"""The public kernel ops; Triton needs tensors contiguous in their last dimension, and
``<op>/triton.py`` exposes ``launch_<op>(..., outputs)`` for static buffers."""

from __future__ import annotations

from ignition.kernels.dispatch import KernelOp, register

packed_paged_attention = register(KernelOp("packed_paged_attention", "paged_attention"))
write_paged_kv = register(KernelOp("write_paged_kv", "paged_attention"))
chunk_gated_delta_rule = register(KernelOp("chunk_gated_delta_rule", "gated_delta_rule"))
recurrent_gated_delta_rule = register(KernelOp("recurrent_gated_delta_rule", "gated_delta_rule"))
causal_conv1d_prefill = register(KernelOp("causal_conv1d_prefill", "causal_conv1d"))
causal_conv1d_update = register(KernelOp("causal_conv1d_update", "causal_conv1d"))
allocate_speculative_prefixes = register(
    KernelOp("allocate_speculative_prefixes", "speculative_allocation")
)
rejection_verify = register(KernelOp("rejection_verify", "rejection_verify"))
block_topk = register(KernelOp("block_topk", "block_topk"))
gather_rows = register(KernelOp("gather_rows", "row_gather"))
publish_and_wait = register(KernelOp("publish_and_wait", "mailbox_wait"))
compress_block_keys = register(KernelOp("compress_block_keys", "qsa_block_compress"))
qsa_block_scores = register(KernelOp("qsa_block_scores", "qsa_block_scores"))
qsa_sparse_attention = register(KernelOp("qsa_sparse_attention", "qsa_sparse_attention"))
write_pending_keys = register(KernelOp("write_pending_keys", "qsa_block_compress"))

__all__ = [
    "allocate_speculative_prefixes",
    "block_topk",
    "causal_conv1d_prefill",
    "causal_conv1d_update",
    "chunk_gated_delta_rule",
    "compress_block_keys",
    "gather_rows",
    "packed_paged_attention",
    "publish_and_wait",
    "qsa_block_scores",
    "qsa_sparse_attention",
    "recurrent_gated_delta_rule",
    "rejection_verify",
    "write_paged_kv",
    "write_pending_keys",
]
